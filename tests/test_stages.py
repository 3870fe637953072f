"""Tests of the training stages as parameter objects (``training/_stages.py``):
SupE, SupFC and MetaTraining, checked alone and together, and the learning
rates they resolve."""

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.training import MetaTraining, SupE, SupFC
from sklearn_flowr.training._stages import (
    check_stages,
    meta_encoder_lr,
    pretraining_lr,
)
from sklearn_flowr.training.pipeline import training_params

STAGES = [
    SupE(epochs=3, lr=2e-3, batch_size=16, beta=0.2),
    SupFC(epochs=4, lr=5e-4, batch_size=8),
    MetaTraining(epochs=2, episodes_per_epoch=7, n_way=4, n_query=3, n_unknown=1,
                 encoder_lr=1e-4, prior_lr=None, episode_discount=0.3,
                 episode_noise=0.7, learn_episode_noise=True,
                 episode_class_prior="uniform", episode_known_count=2.0,
                 lambda_adapt=0.0, class_stats="learned",
                 match_episode_noise=False, known_table="learned",
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


def test_flowr_default_parts_are_each_instances_own():
    """Check that changing a default part in place (attribute or its own
    set_params) changes no other FLOWRClassifier, and that clone keeps the
    part it is given."""
    model = FLOWRClassifier()
    model.head.a = 0.1
    model.head.set_params(prior_scale=3.0)
    model.meta.n_way = 4
    model.pretrain.set_params(epochs=3)
    fresh = FLOWRClassifier()
    assert (fresh.head.a, fresh.head.prior_scale) == (0.5, 1.0)
    assert fresh.meta.n_way == 10 and fresh.pretrain.epochs == 20
    assert fresh.head is not FLOWRClassifier().head
    cloned = clone(model)
    assert (cloned.head.a, cloned.meta.n_way, cloned.pretrain.epochs) == (0.1, 4, 3)
    assert repr(FLOWRClassifier()) == "FLOWRClassifier()"


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
    (MetaTraining(encoder_lr=-1.0), "encoder_lr"),
    (MetaTraining(prior_lr=0.0), "prior_lr"),
    (MetaTraining(episode_discount=1.0), "episode_discount"),
    (MetaTraining(episode_noise=0.0), "episode_noise"),
    (MetaTraining(learn_episode_noise="yes"), "learn_episode_noise"),
    (MetaTraining(episode_class_prior="flat"), "episode_class_prior"),
    (MetaTraining(episode_known_count=0.0), "episode_known_count"),
    (MetaTraining(lambda_adapt=-0.1), "lambda_adapt"),
    (MetaTraining(class_stats="x"), "class_stats"),
    (MetaTraining(match_episode_noise=None), "match_episode_noise"),
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


# ---------------------------------------------------- settings of training
def test_training_params_flatten_the_stages():
    """Check the stages' settings become ``pretrain__*`` / ``meta__*`` keys
    next to the stage's class, every setting kept."""
    params = training_params(backbone="mlp", pretrain=STAGES[0], meta=STAGES[2])
    assert params["backbone"] == "mlp" and params["pretrain"] == "SupE"
    assert params["meta"] == "MetaTraining"
    for name, stage in (("pretrain", STAGES[0]), ("meta", STAGES[2])):
        assert {key: params[f"{name}__{key}"] for key in stage.get_params()} == (
            stage.get_params())
    assert training_params(pretrain=None) == {"pretrain": None}


def test_check_stages_validates_each_stage_first():
    with pytest.raises(InvalidParameterError, match="'n_way' parameter"):
        check_stages(SupE(), MetaTraining(n_way=0))
    with pytest.raises(InvalidParameterError, match="'epochs' parameter"):
        check_stages(SupE(epochs=-2), None)


# ------------------------------------------------------------ learning rates
@pytest.mark.parametrize("backbone, pretrain, meta, lr, meta_lr", [
    ("conv4", SupE(), MetaTraining(), 1e-3, 1e-4),
    ("mlp", SupFC(), MetaTraining(), 1e-3, 1e-4),
    ("resnet12", SupE(), MetaTraining(), 1e-4, 1e-5),
    ("resnet18", SupFC(), None, 1e-4, 1e-5),
    ("mlp", SupE(lr=2e-3), MetaTraining(), 2e-3, 2e-4),
    ("mlp", SupE(lr=2e-3), MetaTraining(encoder_lr=5e-4), 2e-3, 5e-4),
    ("conv4", None, MetaTraining(), 1e-3, 1e-4),
    ("resnet12", None, MetaTraining(encoder_lr=3e-3), 1e-4, 3e-3),
])
def test_learning_rates_resolve(backbone, pretrain, meta, lr, meta_lr):
    """Check the default rates: 1e-3 (1e-4 for ResNets) for pre-training, a
    tenth of it for meta-training's encoder; given rates are kept."""
    assert pretraining_lr(pretrain, backbone) == pytest.approx(lr)
    assert meta_encoder_lr(meta, pretrain, backbone) == pytest.approx(meta_lr)


def test_module_backbone_takes_the_conv4_rate():
    assert pretraining_lr(SupE(), torch.nn.Linear(4, 2)) == pytest.approx(1e-3)


@pytest.mark.parametrize("pretrain, meta, message", [
    (SupFC(), MetaTraining(class_stats="learned"), "needs pretrain=SupE()"),
    (None, MetaTraining(class_stats="learned"), "needs pretrain=SupE()"),
    (SupE(), MetaTraining(episode_discount=0.9, episode_known_count=0.5),
     "episode_known_count=0.5 must exceed episode_discount=0.9"),
])
def test_check_stages_checks_the_combination(pretrain, meta, message):
    """Check settings valid alone but not together fail when the parts meet."""
    with pytest.raises(ValueError, match=message):
        check_stages(pretrain, meta)


def test_resolving_rates_leaves_the_stages_unchanged():
    """Check the rates are resolved where they are used, not on the stages (a
    refit with another backbone resolves them again)."""
    pretrain, meta = SupE(), MetaTraining()
    meta_encoder_lr(meta, pretrain, "resnet12")
    assert pretrain.lr is None and meta.encoder_lr is None
    np.testing.assert_equal(pretrain.get_params(), SupE().get_params())
