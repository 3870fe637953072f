"""Tests of the input contract of FLOWRClassifier (``sklearn_flowr.validation``)."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits

from sklearn_flowr import FLOWRClassifier
from sklearn_flowr.training import MetaTraining, SupE
from sklearn_flowr.validation import as_model_input


@pytest.fixture
def pixels(rng):
    """Five 8-bit 8x8 gray images using the whole 0..255 range."""
    images = rng.integers(0, 256, size=(5, 8, 8)).astype(np.uint8)
    images[0, 0, 0], images[0, 0, 1] = 0, 255
    return images


@pytest.fixture(scope="module")
def image_model():
    """A conv4 FLOWR fitted (briefly) on 8x8 float images in [0, 1]."""
    rng = np.random.default_rng(0)
    X = rng.random((40, 8, 8)).astype(np.float32)
    y = np.repeat(np.arange(4), 10)
    return FLOWRClassifier(backbone="conv4", setting="large", embedding_dim=4,
                           pretrain=SupE(epochs=1), meta=None, calibration=None,
                           verbose=0, random_state=0).fit(X, y)


def test_uint8_images_are_divided_by_255(pixels):
    """Check that uint8 images arrive in [0, 1], as float32 ``value / 255``."""
    out = as_model_input(pixels, allow_features=False)
    assert out.dtype == np.float32 and out.shape == (5, 1, 8, 8)
    np.testing.assert_array_equal(out[:, 0], pixels.astype(np.float32) / 255)


def test_uint16_images_are_divided_by_65535(pixels):
    """Check that a 16-bit image of the same picture (v * 257) is the same input
    as the 8-bit one, not 257 times brighter."""
    wide = pixels.astype(np.uint16) * 257
    np.testing.assert_array_equal(as_model_input(wide, allow_features=False),
                                  as_model_input(pixels, allow_features=False))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64,
                                   np.uint32, np.uint64])
def test_other_integer_images_are_rejected(pixels, dtype):
    """Check that integer images of ambiguous scale raise, naming the dtype and
    the conversion to make."""
    with pytest.raises(ValueError, match=rf"{np.dtype(dtype)} images.*astype"):
        as_model_input(pixels.astype(dtype), allow_features=False)


def test_integer_features_are_used_as_given(rng):
    """Check that 2-d integer feature vectors (not pixels) keep their values."""
    X = rng.integers(-50, 50, size=(4, 3))
    np.testing.assert_array_equal(as_model_input(X, allow_features=True), X)


def test_float_images_in_0_255_warn(pixels):
    """Check that float images that look like unscaled 8-bit pixels are used as
    given, with a warning that says how to scale them."""
    unscaled = pixels.astype(np.float64)
    with pytest.warns(UserWarning, match="pixel values that were not scaled"):
        out = as_model_input(unscaled, allow_features=False)
    np.testing.assert_array_equal(out[:, 0], unscaled)


@pytest.mark.parametrize("kind", ["unit", "standardised", "features"])
def test_float_input_without_ambiguity_does_not_warn(pixels, kind):
    """Check that [0, 1] images, standardised images (negative values) and 2-d
    float features in any range pass silently."""
    unit = pixels / 255.0
    X = {"unit": unit, "standardised": (unit - 0.5) / 0.2,
         "features": pixels.reshape(5, -1).astype(np.float64)}[kind]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        as_model_input(X, allow_features=kind == "features")


def test_flowr_predicts_the_same_for_8_and_16_bit_images(image_model, pixels):
    """Check that FLOWRClassifier gives one answer for the same picture as
    uint8, uint16 and [0, 1] floats, and refuses int64 pixels."""
    expected = image_model.predict_proba(pixels.astype(np.float32) / 255)
    np.testing.assert_allclose(image_model.predict_proba(pixels), expected,
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        image_model.predict_proba(pixels.astype(np.uint16) * 257), expected,
        rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="int64 images"):
        image_model.predict_proba(pixels.astype(np.int64))



def test_a_model_fitted_on_unscaled_images_warns_in_fit_only():
    """Check that unscaled float images warn once, in ``fit``, and not again on
    each later call with the same kind of images; a model fitted on scaled
    images still warns when it is handed unscaled ones."""
    X, y = load_digits(return_X_y=True)
    X, y = X.reshape(-1, 8, 8)[:300], y[:300]  # pixels 0..16, as floats
    params = dict(pretrain=SupE(epochs=1), embedding_dim=4, verbose=0, random_state=0,
                  meta=MetaTraining(epochs=1, episodes_per_epoch=2, n_way=3,
                                    n_unknown=1))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        unscaled = FLOWRClassifier(**params).fit(X[y < 5], y[y < 5])
        scaled = FLOWRClassifier(**params).fit(X[y < 5] / 16, y[y < 5])
    texts = [str(w.message) for w in record if "not scaled" in str(w.message)]
    assert len(texts) == 1 and "[0, 16]" in texts[0], texts
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        unscaled.predict(X)
        unscaled.predict_proba(X * 0.5)
        unscaled.partial_fit(X[y == 6][:2], y[y == 6][:2])
    assert not [w for w in record if "not scaled" in str(w.message)]
    with pytest.warns(UserWarning, match="not scaled"):
        scaled.predict(X)
    with pytest.warns(UserWarning, match=r"\[0, 255\]"):  # another scale
        unscaled.predict(X * 255 / 16)
