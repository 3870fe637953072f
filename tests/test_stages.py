"""Tests of the training stages as parameter objects (``training/_stages.py``):
SupE, SupFC and MetaTraining, and the configuration they build together
(``FLOWRConfig.from_parts``)."""

import dataclasses

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.training import MetaTraining, SupE, SupFC
from sklearn_flowr.training._config import FLOWRConfig

CONFIG_FIELDS = {field.name for field in dataclasses.fields(FLOWRConfig)}
STAGES = [
    SupE(epochs=3, lr=2e-3, batch_size=16, beta=0.2),
    SupFC(epochs=4, lr=5e-4, batch_size=8),
    MetaTraining(epochs=2, episodes_per_epoch=7, n_way=4, n_query=3, n_unknown=1,
                 lr=1e-4, head_lr=None, a=0.3, sigma=0.7, learn_sigma=True,
                 class_prior="uniform", known_count=2.0, lambda_adapt=0.0,
                 class_stats="learned", match_sigma=False, known_table="learned",
                 autocast="bf16"),
]


# ------------------------------------------------------------ sklearn API
@pytest.mark.parametrize("stage", STAGES, ids=lambda s: type(s).__name__)
def test_stage_params_round_trip(stage):
    """Check get_params, set_params and clone as on any scikit-learn
    estimator: clone keeps every setting, set_params changes one and returns
    the stage."""
    params = stage.get_params()
    twin = clone(stage)
    assert twin is not stage and twin.get_params() == params
    name = "batch_size" if "batch_size" in params else "n_way"
    assert twin.set_params(**{name: 99}) is twin
    assert twin.get_params()[name] == 99
    assert stage.get_params()[name] == params[name]


def test_sup_fc_has_no_variance_penalty():
    """Check beta is Sup-E's setting only."""
    with pytest.raises(ValueError, match="Invalid parameter 'beta'"):
        SupFC().set_params(beta=0.1)


def test_repr_lists_the_changed_settings():
    assert repr(MetaTraining(epochs=2, n_way=5)) == "MetaTraining(epochs=2, n_way=5)"
    assert repr(SupE()) == "SupE()"


def test_flowr_classifier_reaches_stage_settings_as_nested_params():
    """Check pretrain__* and meta__* through FLOWRClassifier, and that setting
    one on the shared default stage leaves other estimators alone."""
    model = FLOWRClassifier(pretrain=SupFC(epochs=3))
    params = model.get_params(deep=True)
    assert params["pretrain__epochs"] == 3 and params["meta__n_way"] == 10
    model.set_params(meta__n_way=4, pretrain__batch_size=32)
    assert model.meta.n_way == 4 and model.pretrain.batch_size == 32
    assert FLOWRClassifier().meta.n_way == 10
    assert clone(model).get_params(deep=True)["meta__n_way"] == 4


# ------------------------------------------------------------- validation
@pytest.mark.parametrize("stage, name", [
    (SupE(epochs=-1), "epochs"),
    (SupE(lr=0.0), "lr"),
    (SupE(batch_size=0), "batch_size"),
    (SupE(beta=-0.1), "beta"),
    (SupFC(epochs=1.5), "epochs"),
    (MetaTraining(epochs=0), "epochs"),
    (MetaTraining(episodes_per_epoch=0), "episodes_per_epoch"),
    (MetaTraining(n_way=0), "n_way"),
    (MetaTraining(n_query=0), "n_query"),
    (MetaTraining(n_unknown=-1), "n_unknown"),
    (MetaTraining(lr=-1.0), "lr"),
    (MetaTraining(head_lr=0.0), "head_lr"),
    (MetaTraining(a=1.0), "a"),
    (MetaTraining(sigma=0.0), "sigma"),
    (MetaTraining(learn_sigma="yes"), "learn_sigma"),
    (MetaTraining(class_prior="flat"), "class_prior"),
    (MetaTraining(known_count=0.0), "known_count"),
    (MetaTraining(lambda_adapt=-0.1), "lambda_adapt"),
    (MetaTraining(class_stats="x"), "class_stats"),
    (MetaTraining(match_sigma=None), "match_sigma"),
    (MetaTraining(known_table="x"), "known_table"),
    (MetaTraining(autocast="fp8"), "autocast"),
])
def test_validate_names_the_setting(stage, name):
    """Check validate() refuses a bad setting with scikit-learn's parameter
    error naming the setting and the stage."""
    with pytest.raises(InvalidParameterError,
                       match=f"The '{name}' parameter of {type(stage).__name__}"):
        stage.validate()


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: type(s).__name__)
def test_validate_returns_the_stage(stage):
    assert stage.validate() is stage


def test_flowr_fit_validates_the_stages_before_training(digits, no_training):
    """Check a bad stage setting fails fit before any training, named."""
    X, y = digits
    model = FLOWRClassifier(backbone="mlp", meta=MetaTraining(n_way=0), verbose=0)
    with pytest.raises(InvalidParameterError, match="'n_way' parameter"):
        model.fit(X[y < 4], y[y < 4])
    assert not hasattr(model, "head_")


@pytest.mark.parametrize("params", [dict(pretrain="sup-e"), dict(meta=3),
                                    dict(head="full")])
def test_flowr_refuses_parts_that_are_not_stages(digits, no_training, params):
    """Check a part given as a name (the flat API's pretrain="sup-e") is
    refused by its parameter name."""
    X, y = digits
    name = next(iter(params))
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter"):
        FLOWRClassifier(backbone="mlp", verbose=0, **params).fit(X[y < 4], y[y < 4])


# ----------------------------------------------------------- config fields
def test_pretraining_config_fields():
    """Check the stages' settings become FLOWRConfig's pre-training fields."""
    assert SupE(epochs=3, lr=2e-3, batch_size=16, beta=0.2).config_fields() == dict(
        pretrain="sup-e", pretrain_epochs=3, lr=2e-3, batch_size=16, beta=0.2)
    assert SupFC(epochs=4, batch_size=8).config_fields() == dict(
        pretrain="sup-fc", pretrain_epochs=4, lr=None, batch_size=8)


def test_meta_training_config_fields():
    """Check epochs and lr become meta_epochs and meta_lr; every other setting
    keeps its name; each one is a FLOWRConfig field."""
    stage = STAGES[2]
    fields = stage.config_fields()
    assert fields["meta_epochs"] == 2 and fields["meta_lr"] == 1e-4
    assert "epochs" not in fields and "lr" not in fields
    others = {k: v for k, v in stage.get_params().items() if k not in ("epochs", "lr")}
    assert {k: fields[k] for k in others} == others
    assert set(fields) <= CONFIG_FIELDS


@pytest.mark.parametrize("stage", [SupE(), SupFC()], ids=["SupE", "SupFC"])
def test_pretraining_fields_are_config_fields(stage):
    assert set(stage.config_fields()) <= CONFIG_FIELDS


def test_config_fields_validate_first():
    with pytest.raises(InvalidParameterError, match="'n_way' parameter"):
        MetaTraining(n_way=0).config_fields()
    with pytest.raises(InvalidParameterError, match="'epochs' parameter"):
        SupE(epochs=-2).config_fields()


# ---------------------------------------------------------------- from_parts
@pytest.mark.parametrize("backbone, pretrain, meta, lr, meta_lr", [
    ("conv4", SupE(), MetaTraining(), 1e-3, 1e-4),
    ("mlp", SupFC(), MetaTraining(), 1e-3, 1e-4),
    ("resnet12", SupE(), MetaTraining(), 1e-4, 1e-5),
    ("resnet18", SupFC(), None, 1e-4, 1e-5),
    ("mlp", SupE(lr=2e-3), MetaTraining(), 2e-3, 2e-4),
    ("mlp", SupE(lr=2e-3), MetaTraining(lr=5e-4), 2e-3, 5e-4),
    ("conv4", None, MetaTraining(), 1e-3, 1e-4),
    ("resnet12", None, MetaTraining(lr=3e-3), 1e-4, 3e-3),
])
def test_from_parts_resolves_learning_rates(backbone, pretrain, meta, lr, meta_lr):
    """Check the default rates: 1e-3 (1e-4 for ResNets) for pre-training, a
    tenth of it for meta-training; given rates are kept."""
    config = FLOWRConfig.from_parts(backbone=backbone, pretrain=pretrain, meta=meta)
    assert config.lr == pytest.approx(lr)
    assert config.meta_lr == pytest.approx(meta_lr)


def test_from_parts_module_backbone_takes_the_conv4_rate():
    module = torch.nn.Linear(4, 2)
    config = FLOWRConfig.from_parts(backbone=module, pretrain=SupE())
    assert config.lr == pytest.approx(1e-3) and config.backbone is module


def test_from_parts_without_stages():
    """Check meta=None trains no episodes and pretrain=None no pre-training,
    the other fields keeping FLOWRConfig's defaults."""
    default = FLOWRConfig()
    config = FLOWRConfig.from_parts(backbone="mlp", pretrain=None, meta=None)
    assert config.pretrain is None
    assert config.pretrain_epochs == 0 and config.meta_epochs == 0
    assert (config.n_way, config.sigma, config.batch_size) == (
        default.n_way, default.sigma, default.batch_size)
    only_meta = FLOWRConfig.from_parts(pretrain=None, meta=MetaTraining(epochs=2))
    assert only_meta.pretrain_epochs == 0 and only_meta.meta_epochs == 2
    only_pretrain = FLOWRConfig.from_parts(pretrain=SupE(epochs=5), meta=None)
    assert only_pretrain.pretrain == "sup-e" and only_pretrain.pretrain_epochs == 5
    assert only_pretrain.meta_epochs == 0


def test_from_parts_carries_the_estimator_settings(tmp_path):
    config = FLOWRConfig.from_parts(backbone="mlp", setting="large",
                                    embedding_dim=5, pretrain=SupE(),
                                    meta=MetaTraining(n_way=3), verbose=0,
                                    checkpoint_dir=tmp_path)
    assert (config.backbone, config.setting, config.embedding_dim, config.n_way,
            config.verbose, config.checkpoint_dir) == ("mlp", "large", 5, 3, 0,
                                                      tmp_path)
    assert config.takes_features


@pytest.mark.parametrize("pretrain, meta, message", [
    (SupFC(), MetaTraining(class_stats="learned"), "needs pretrain='sup-e'"),
    (None, MetaTraining(class_stats="learned"), "needs pretrain='sup-e'"),
    (SupE(), MetaTraining(a=0.9, known_count=0.5),
     "known_count=0.5 must exceed a=0.9"),
])
def test_from_parts_checks_the_combination(pretrain, meta, message):
    """Check settings valid alone but not together fail when the parts meet."""
    with pytest.raises(ValueError, match=message):
        FLOWRConfig.from_parts(pretrain=pretrain, meta=meta)


def test_from_parts_leaves_the_stages_unchanged():
    """Check building the configuration resolves the rates on the config, not
    on the stages (a refit with another backbone resolves them again)."""
    pretrain, meta = SupE(), MetaTraining()
    FLOWRConfig.from_parts(backbone="resnet12", pretrain=pretrain, meta=meta)
    assert pretrain.lr is None and meta.lr is None
    np.testing.assert_equal(pretrain.get_params(), SupE().get_params())
