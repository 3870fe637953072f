"""benchmarks/main_job.py: EVM's share of the evaluation, from results.json."""

import pytest


def test_evm_share_is_evm_seconds_over_every_row(load_benchmark_script):
    """Check the share sums EVM's rows over all rows, per setting and in all."""
    results = {"settings": {
        "small": {"rows": [{"method": "flowr", "seconds": 3.0},
                           {"method": "evm", "seconds": 1.0}]},
        "large": {"rows": [{"method": "ncm", "seconds": 2.0},
                           {"method": "evm", "seconds": 4.0},
                           {"method": "evm", "seconds": 0.0}]},
    }}
    share, per_setting = load_benchmark_script("main_job.py").evm_share(results)
    assert share == pytest.approx(5.0 / 10.0)
    assert per_setting == {"small": (1.0, 4.0), "large": (4.0, 6.0)}
