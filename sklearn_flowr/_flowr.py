"""FLOWRClassifier: a skorch-trained torch encoder in front of the CRP-Gaussian head.

The estimator is a scikit-learn shell: it validates its parameters into one
:class:`~sklearn_flowr.training._config.FLOWRConfig`, hands training to the
stages of :mod:`sklearn_flowr.training` (``train_flowr``), and serves the
fitted encoder and head (docs/design.rst, section 5).
"""

import copy
import dataclasses

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils.validation import _check_feature_names

from ._encoder_head import EncoderHeadMixin
from ._head import CRPGaussianClassifier
from ._inputs import as_model_input, check_labels
from ._params import snapshot_params
from .protocol._cross_fit import cross_fit_on_plan
from .training._checkpoints import check_fingerprint
from .training._config import PARAMETER_CONSTRAINTS, FLOWRConfig
from .training._device import deterministic_cuda
from .training._pipeline import (
    check_calibration_plan,
    check_fold_training,
    check_training_plan,
    train_flowr,
)
from .training._runner import StageRunner

__all__ = ["FLOWRClassifier"]

# noise_shrinkage="auto" picks one of these on calibration_cv's held-out
# classes (the values benchmarks/noise_shrinkage.py sweeps).
NOISE_SHRINKAGE_GRID = (0.0, 0.05, 0.1, 0.2, 0.3)


class FLOWRClassifier(EncoderHeadMixin, ClassifierMixin, TransformerMixin,
                      BaseEstimator):
    """Few-shot open-world recognition: trained encoder + CRP-Gaussian head.

    ``fit`` pre-trains a torch encoder (Sup-E by default), meta-trains it with
    the FLOWR head in the small or large context, and builds a
    :class:`~sklearn_flowr.CRPGaussianClassifier` on its embeddings. After that
    the model learns new classes online from their labels (``partial_fit``,
    ``open_world_step``) without touching the network.

    Parameters
    ----------
    backbone : {"conv4", "resnet12", "resnet18", "mlp", "efficientnet-lite0"} \
or torch.nn.Module, default="conv4"
        Encoder; a module instance is used as given and must end in a linear
        layer to the embedding. ``"efficientnet-lite0"`` is the ImageNet
        EfficientNet-Lite0 of the optional ``efficientnet`` extra, frozen, with
        a trained linear layer to the embedding
        (:class:`~sklearn_flowr.encoders.EfficientNetLite0Encoder`).
    setting : {"small", "large"}, default="small"
        ``"small"``: learn the representation and the prior; classes come from
        a support set (:meth:`adapt`) or online. ``"large"``: the training
        classes stay as known-known classes of the head.
    pretrain : {"sup-e", "sup-fc"} or None, default="sup-e"
        Supervised-embedding pre-training, the linear-head baseline, or none.
    class_stats : {"empirical", "learned"}, default="empirical"
        Class statistics ``(mu_n, s_n)`` that start meta-training (the prior
        ``mu0, s0``; in the large context also the known-known table).
        ``"empirical"``: mean and isotropic variance of each class's
        pre-trained embeddings. ``"learned"``: Sup-E's learned class
        parameters (the paper's reading; needs ``pretrain="sup-e"``). The
        default deviates on purpose: on a short pre-training budget the
        learned parameters lag far behind the embeddings (measured on digits:
        prior spread 0.045 against an actual class-mean spread of 1.6 per
        dimension), which leaves the head badly mis-calibrated.
    a : float, default=0.5
        CRP discount.
    sigma : float, default=0.5
        Class-noise variance.
    match_sigma : bool, default=True
        After pre-training, rescale the encoder's last linear layer so that
        the mean within-class variance of the training embeddings equals
        ``sigma``. The head's Gaussian model assumes class noise ``sigma * I``;
        pre-training fixes no scale (measured on digits: within-class variance
        0.008 against sigma = 0.5, which leaves every likelihood flat and
        P(novel) equal to the CRP prior). The rescaling is an empirical-Bayes
        step on the scale that meta-training then refines. Not in the paper.
    class_prior : {"crp", "uniform"}, default="crp"
    covariance : {"full", "isotropic"}, default="full"
        The head built after meta-training. ``"full"`` (not in the paper):
        ``mu0``, a full prior covariance and a full class-noise covariance by
        empirical Bayes on the training classes' meta-trained embeddings
        (``CRPGaussianClassifier(covariance="full")``; ``a`` and the
        meta-learned ``b`` are kept). ``"isotropic"``: the paper's head, class
        noise ``sigma * I`` and the meta-learned prior ``(mu0, s0)``.
        Meta-training itself is the paper's either way. The embeddings are far
        from isotropic: with the isotropic head P(novel) ranks novelty below a
        nearest-mean distance on the same embedding, while the full head
        ties or beats the distances on glyphs, kanji and fashion-mnist and
        has the better accuracy, at an ECE of P(novel) 0.01-0.02 higher; it
        ties the distances on Debian's fonts (small context; some seeds lost)
        and loses digits' small context with Sup-FC and fashion-mnist's large
        context with Sup-E. See the README's measured figures;
        ``flowr-benchmark`` reports both heads.
    prior_scale : float, default=1.0
        With ``covariance="full"``: factor on the empirical-Bayes prior
        covariance of the class means (1.0: plain empirical Bayes; not in the
        paper). The training classes' means, on the embedding trained on
        them, spread less than new classes' means, which leaves P(novel)
        over-confident at the top; measured on the cached ``flowr-benchmark
        --quick`` models (glyphs seed 0, kanji seeds 0-2, ``--prior-scale``),
        1.5 brings the ECE of P(novel) to at most 0.029 in every cell (from
        up to 0.040) for at most 0.8 accuracy points (0.3 on kanji), raising
        the H-measure on glyphs and lowering it by up to 0.02 on kanji's
        large context; on digits and fashion-mnist (five training classes)
        it changes nothing measurable (ECE 0.04-0.05 either way).
        Must be 1.0 with ``covariance="isotropic"``.
    noise_shrinkage : float in [0, 1] or "auto", default=0.0
        With ``covariance="full"``: shrink the empirical-Bayes class-noise
        covariance further towards isotropic (``CRPGaussianClassifier``'s
        parameter; 0.0: the Ledoit-Wolf estimate; not in the paper). New
        classes are less squeezed than the training classes in the directions
        the encoder squeezed for them. Measured on the cached benchmark models
        (docs/user_guide.rst, "The noise covariance of new classes"): 0.1
        raises the small-context H-measure on glyph fonts by up to 0.04 and
        costs kanji up to 0.007 and the five-class datasets' accuracy 1-4
        points; in the large context it lowers glyph and kanji accuracy and
        raises the five-class datasets' H-measure. Choose it on classes the
        encoder did not see (:func:`~sklearn_flowr.protocol.select_head_params`
        scores small-context tasks of validation classes). ``"auto"``: chosen
        from (0, 0.05, 0.1, 0.2, 0.3) by the H-measure of the fold models'
        heads on the held-out classes of ``calibration_cv``, which it needs,
        among the values whose accuracy there is within one point of the most
        accurate one's; the value is ``noise_shrinkage_``. Measured (README,
        "The noise covariance of new classes"): on glyphs' small context it
        gained 0.011-0.023 H-measure for at most 0.2 accuracy points; on
        five-class encoders it raised the large-context H-measure and cost
        fashion-mnist's small context 4-5 accuracy points (folds of two
        held-out classes cannot show that cost; it warns then).
        Must be 0.0 with ``covariance="isotropic"``.
    calibrate_novelty : bool, default=True
        After training, fit a Platt map of P(novel) on open-world tasks drawn
        from the training classes' final embeddings
        (:func:`~sklearn_flowr.protocol.calibrate_novelty`; not in the paper)
        and set it as the head's ``novelty_calibration``. It keeps the order
        of P(novel), so the H-measure and the fixed-TPR accuracy do not move;
        the ECE of P(novel) fell from 0.024-0.037 to 0.002-0.015 on glyphs
        and to 0.001-0.009 on kanji, and did not improve with five training
        classes (digits, fashion-mnist), where episodes of the training
        classes do not look like new ones (README, "Measured figures"); with
        ``covariance="isotropic"`` it is mapped too. ``False``: the model's
        own P(novel), as in the paper. Needs every class to have two or more
        rows.
    calibration_cv : int, cross-validation generator, iterable or None, \
default=None
        With ``calibrate_novelty``, where the map's tasks come from. ``None``:
        tasks of the training classes on the final embedding (above). Folds of
        whole classes (an int ``k``: :class:`~sklearn.model_selection.GroupKFold`
        over the labels; or a group splitter such as
        :class:`~sklearn.model_selection.GroupShuffleSplit`, given
        ``groups=y``): each fold trains a model like this one on its training
        classes, and tasks of the classes it held out -- which that model has
        never seen, as deployed models meet new classes -- fit the map
        (:func:`~sklearn_flowr.protocol.cross_fit_novelty_calibration`; not in
        the paper). It costs one training per fold. Measured with five
        training classes, where the default map does not help: five folds of
        two held-out classes brought the small-context ECE from 0.027-0.044
        to 0.019-0.021 (fashion-mnist) and 0.032 (digits), and did not beat
        the default map in the large context on fashion-mnist (slightly on
        digits, still above 0.03); with 224 training classes (glyphs) it was
        worse than the default map (README, "Calibrating P(novel)"). Small
        context: every fold holds out 2 or more classes. Not with an
        ``accelerator``. Unlike scikit-learn's ``cv=None`` (5 folds), ``None``
        here means no folds. A fitted model that holds a splitter needs its
        type trusted by ``skops.io.loads``.
    known_count : float, default=1.0
        CRP pseudo-count of the known-known classes (large context).
    novel_label : object, default="auto"
        See :class:`~sklearn_flowr.CRPGaussianClassifier`.
    embedding_dim : int, default=64
    pretrain_epochs : int, default=20
    meta_epochs : int, default=10
        0 skips meta-training (the prior then comes from the class means).
    episodes_per_epoch : int, default=100
    n_way : int, default=10
        Support classes per small-context episode / known classes queried per
        large-context episode. 10 matches the evaluation tasks' 10 support
        classes (measured on glyphs, 32-d, 1,000 episodes at ``meta_lr=1e-4``:
        small-context H-measure 0.462 with 10 against 0.423 with 5).
    n_query : int, default=5
        Query rows per class in an episode.
    n_unknown : int, default=2
        Unknown-unknown classes per episode.
    lr : float or None, default=None
        Pre-training learning rate (Adam); also the rate of :meth:`adapt`'s
        fine-tuning. ``None``: the paper's 1e-3 for Conv4/MLP, 1e-4 for ResNets.
    head_lr : float or None, default=1e-2
        Learning rate of the head's parameters during meta-training (``mu0``,
        ``s0``, ``b``, the known-known table, ``sigma`` when learned); ``None``
        trains them at ``meta_lr`` like the encoder, as the paper does. With
        Adam a parameter moves about one learning rate per step, so at
        ``meta_lr`` a log-variance or ``b`` barely moves in thousands of
        episodes while the encoder changes the embedding under them.
    learn_sigma : bool, default=False
        Meta-train ``sigma`` with the head (its start is ``sigma``); the
        fitted head uses the learned value. The paper keeps it fixed.
    meta_lr : float or None, default=None
        Meta-training learning rate. ``None``: a tenth of ``lr``. A deviation
        from the paper, which uses one rate for both stages: meta-training
        starts from a pre-trained encoder, and at 1e-3 Adam's first steps
        undo what pre-training learned faster than the episodes refine it
        (measured on glyphs, Conv4, 32-d: the episode loss rose from 1.05 to
        1.44 over 90 steps, and small-context H-measure fell from 0.344 before
        meta-training to 0.237 after; at 1e-4 the loss fell and H rose to 0.394
        after 90 steps, 0.423 after 1,000).
    batch_size : int, default=64
        Pre-training batch size (and embedding batch size).
    beta : float, default=0.1
        Weight of the Sup-E variance penalty.
    lambda_adapt : float, default=0.1
        Weight of the adaptation loss.
    fine_tune_steps : int, default=0
        Last-layer fine-tuning steps in :meth:`adapt` (small context).
    known_table : {"refit", "learned"}, default="refit"
        Large context: how the head's known-known classes are built after
        meta-training. ``"refit"``: every training class is conditioned from
        the learned prior on its training embeddings under the final encoder,
        exactly as the head learns any class online. ``"learned"``: the
        meta-trained table ``(q_n, lam_n)`` (the paper's reading; held-out
        classes are conditioned as in ``"refit"``). The default deviates on
        purpose: each known class is queried in few episodes, so its learned
        parameters lag behind the encoder that meta-training moves (measured on
        glyphs, 224 classes, 500 episodes: closed-set accuracy of the learned
        table on held-out rows 0.59 against 0.80 for the refitted one, and
        large-context accuracy 0.42 against 0.65 over 1,000 tasks).
    update_known : bool, default=False
        Let online labels update the known-known classes (the paper keeps
        them fixed).
    autocast : {"bf16"} or None, default=None
        ``"bf16"`` runs the encoder under bfloat16 autocast during
        meta-training (the loss stays float32); a GPU speed option.
    device : {"auto", "cpu", "cuda"} or str, default="auto"
        ``"auto"`` uses CUDA when available. Read whenever the model runs:
        ``set_params(device=...)`` after ``fit`` moves it, and a model trained
        on a GPU loads and predicts on a CPU-only machine with ``"auto"``.
        Training on CUDA uses cuDNN's deterministic algorithms (same seed,
        same model), predictions run without TF32 (CPU and CUDA agree to
        float32 rounding).
    accelerator : accelerate.Accelerator or None, default=None
        Train through Hugging Face accelerate (skorch's ``AccelerateMixin``):
        DDP over the processes ``accelerate launch`` starts, on its devices,
        with its mixed precision. Pre-training and meta-training run on
        ``accelerator.device``; prediction follows ``device``. See
        :doc:`/multi_gpu`.
    random_state : int, RandomState or None, default=None
    verbose : int, default=1
        0 is silent; 1 prints skorch's epoch tables with tqdm bars over the
        pre-training batches, the meta-training episodes and the fine-tuning
        steps of :meth:`adapt`.
    checkpoint_dir : str or None, default=None
        Save every epoch there and resume an interrupted ``fit`` from it
        (exactly: epochs are seeded by their number). The folder remembers a
        fingerprint of the data and parameters; a fit that differs (other
        than in epoch counts, ``device`` or ``verbose``) raises rather than
        resume another fit's checkpoints.

    Attributes
    ----------
    head_ : CRPGaussianClassifier
        The online head (its state changes with ``partial_fit``).
    encoder_ : torch.nn.Module
        The encoder in use (a fine-tuned copy after :meth:`adapt`).
    meta_module_ : FLOWRMetaModule
        Encoder and learned head parameters after ``fit``.
    pretrained_encoder_ : torch.nn.Module
        The encoder after pre-training, before meta-training (what baselines
        are compared on).
    classes_ : ndarray of shape (n_classes,)
        Known classes of the head.
    train_classes_ : ndarray of shape (n_train_classes,)
        Classes of the training data.
    input_shape_ : tuple
        Per-sample shape, channels first.
    n_features_in_ : int
        Number of input values per sample (features, or pixels x channels).
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Column names of a feature DataFrame given to ``fit`` (feature inputs
        only).
    novel_label_ : object
        Label :meth:`predict` gives the novel class.
    noise_shrinkage_ : float
        The full head's noise shrinkage (``noise_shrinkage``, or the value
        ``"auto"`` chose).
    calibration_cv_results_ : Bunch or None
        With ``calibration_cv``: the cross-fitted map and, with
        ``noise_shrinkage="auto"``, ``h_measures`` and ``accuracies`` (each
        candidate's mean H-measure and accuracy over the folds), as
        :func:`~sklearn_flowr.protocol.cross_fit_novelty_calibration` returns
        them; ``None`` without.
    noise_scale_ : float
        Factor ``match_sigma`` applied to the embedding (1.0 when off or not
        possible).
    history_ : dict
        skorch histories of the ``"pretrain"`` and ``"meta"`` stages.

    References
    ----------
    .. [1] J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone,
       S. Waslander, "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022.

    Examples
    --------
    The model every method's example uses
    (:func:`sklearn_flowr._examples.flowr_example` fits it once):

    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from sklearn_flowr import FLOWRClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> X = X / 16.0  # 64 pixel features, for the "mlp" backbone
    >>> clf = FLOWRClassifier(backbone="mlp", setting="large", embedding_dim=4,
    ...                       pretrain_epochs=1, meta_epochs=1,
    ...                       episodes_per_epoch=2, n_way=3, n_unknown=1,
    ...                       verbose=0, random_state=0)
    >>> clf = clf.fit(X[y < 5], y[y < 5])
    >>> clf.predict_proba(X[:2]).shape  # 5 known classes + novel
    (2, 6)
    >>> out = clf.open_world_step(X[y == 8][:3], y[y == 8][:3])
    >>> out.is_novel  # class 8 is new at its first sample only
    array([ True, False, False])

    Images work the same with ``backbone="conv4"`` (the default) on arrays of
    shape ``(n, H, W)``, ``(n, H, W, C)`` or ``(n, C, H, W)``.
    """

    _parameter_constraints: dict = PARAMETER_CONSTRAINTS

    def __init__(self, *, backbone="conv4", setting="small", pretrain="sup-e",
                 class_stats="empirical", a=0.5, sigma=0.5, match_sigma=True,
                 class_prior="crp", covariance="full", prior_scale=1.0,
                 noise_shrinkage=0.0, calibrate_novelty=True,
                 calibration_cv=None, known_count=1.0,
                 novel_label="auto", embedding_dim=64, pretrain_epochs=20,
                 meta_epochs=10, episodes_per_epoch=100, n_way=10, n_query=5,
                 n_unknown=2, lr=None, meta_lr=None, head_lr=1e-2,
                 learn_sigma=False, batch_size=64, beta=0.1,
                 lambda_adapt=0.1,
                 fine_tune_steps=0, known_table="refit", update_known=False,
                 autocast=None, device="auto", accelerator=None,
                 random_state=None, verbose=1, checkpoint_dir=None):
        self.backbone = backbone
        self.setting = setting
        self.pretrain = pretrain
        self.class_stats = class_stats
        self.a = a
        self.sigma = sigma
        self.match_sigma = match_sigma
        self.class_prior = class_prior
        self.covariance = covariance
        self.prior_scale = prior_scale
        self.noise_shrinkage = noise_shrinkage
        self.calibrate_novelty = calibrate_novelty
        self.calibration_cv = calibration_cv
        self.known_count = known_count
        self.novel_label = novel_label
        self.embedding_dim = embedding_dim
        self.pretrain_epochs = pretrain_epochs
        self.meta_epochs = meta_epochs
        self.episodes_per_epoch = episodes_per_epoch
        self.n_way = n_way
        self.n_query = n_query
        self.n_unknown = n_unknown
        self.lr = lr
        self.meta_lr = meta_lr
        self.head_lr = head_lr
        self.learn_sigma = learn_sigma
        self.batch_size = batch_size
        self.beta = beta
        self.lambda_adapt = lambda_adapt
        self.fine_tune_steps = fine_tune_steps
        self.known_table = known_table
        self.update_known = update_known
        self.autocast = autocast
        self.device = device
        self.accelerator = accelerator
        self.random_state = random_state
        self.verbose = verbose
        self.checkpoint_dir = checkpoint_dir

    def __setstate__(self, state):
        super().__setstate__(state)
        if "head_" in self.__dict__:
            # Fitted attributes added since a model was saved: what its fit did.
            self.__dict__.setdefault("noise_shrinkage_", self.noise_shrinkage)
            self.__dict__.setdefault("calibration_cv_results_", None)
            results = self.__dict__["calibration_cv_results_"]
            if results is not None:
                results.setdefault("accuracies", None)

    # ------------------------------------------------------------------ fitting
    def _check_cross_fit_plan(self, y, plan):
        """Fail before any fold trains on classes ``fit`` would refuse
        (called by :func:`~sklearn_flowr.protocol.cross_fit_novelty_calibration`)."""
        check_fold_training(FLOWRConfig.from_params(self.get_params(deep=False)),
                            check_labels(y, len(y)), plan)

    def fit(self, X, y):
        """Pre-train, meta-train and build the head on labelled images.

        Every parameter is checked, alone and together
        (:class:`~sklearn_flowr.training._config.FLOWRConfig`), and the labels
        against the episodes meta-training will draw, before any training;
        the model's attributes change only once training has succeeded.

        Parameters
        ----------
        X : array-like of shape (n_samples, H, W), (n_samples, H, W, C), \
(n_samples, C, H, W) or (n_samples, n_features)
            uint8 images are scaled to [0, 1]; feature vectors need
            ``backbone="mlp"`` or a module.
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : FLOWRClassifier

        Examples
        --------
        >>> from sklearn_flowr._examples import flowr_example
        >>> clf, X, y = flowr_example("large")  # fitted as in the class example
        >>> clf = clf.fit(X[y < 3], y[y < 3])  # a refit forgets digits 3, 4
        >>> clf.classes_
        array([0, 1, 2])
        """
        self._validate_params()
        config = FLOWRConfig.from_params(self.get_params(deep=False))
        X_raw = X
        X = as_model_input(X, allow_features=config.takes_features)
        y = check_labels(y, X.shape[0])
        labels, y_index = np.unique(y, return_inverse=True)
        template = CRPGaussianClassifier(**config.head_params())
        # Fail on a clashing novel label before any training.
        template._check_labels(y, None)
        runner = StageRunner.for_fit(
            device=self.device, random_state=self.random_state,
            accelerator=self.accelerator, checkpoint_dir=self.checkpoint_dir,
            verbose=self.verbose)
        check_training_plan(config, y_index, labels.shape[0], runner.seed)
        if config.calibration_cv is not None and self.accelerator is not None:
            raise ValueError(
                "calibration_cv trains one model per fold on this process; it "
                "does not run through an accelerator. Cross-fit without one, "
                "or set calibration_cv=None.")
        plan = check_calibration_plan(config, X, y, runner.seed)
        if self.checkpoint_dir is not None:
            check_fingerprint(self.checkpoint_dir, X, y,
                              self.get_params(deep=False))
        with deterministic_cuda(runner.device.type == "cuda"):
            crossed = None
            if plan is not None:
                if self.verbose:
                    print(f"Cross-fitting the novelty map: {len(plan)} models "
                          "trained on class-disjoint folds.")
                auto = isinstance(config.noise_shrinkage, str)
                crossed = cross_fit_on_plan(
                    self, X, y, plan,
                    noise_shrinkages=NOISE_SHRINKAGE_GRID if auto else None)
                config = dataclasses.replace(
                    config, noise_shrinkage=float(crossed.noise_shrinkage))
            fitted = train_flowr(X, labels, y_index, config, runner, template)
            if crossed is not None:
                fitted["head_"].set_params(
                    novelty_calibration=(crossed.slope, crossed.intercept))
        fitted["noise_shrinkage_"] = float(config.noise_shrinkage)
        fitted["calibration_cv_results_"] = crossed
        if X.ndim == 2:
            _check_feature_names(self, X_raw, reset=True)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        for name, value in fitted.items():
            setattr(self, name, value)
        self._fitted_head = copy.deepcopy(self.head_)
        self._fitted_params = snapshot_params(self)
        return self

