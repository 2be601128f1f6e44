from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.special import softmax

from calibration.data import load_labelled, select_split
from router.app.training import TrainResult
from router.contracts import ROUTES
from router.errors import ArtifactError
from router.models.local.classes import LINEAR_CLASSES
from router.models.local.fitted import artifact_from_fitted
from router.models.local.linear import LinearRouteScorer, save_artifact
from router.models.local.model import LocalRouteModel
from router.models.local.train import TrainOptions, build_pipeline, train_artifact
from router.models.maths import fit_temperature, label_indices
from tests.paths import DATASETS

ROWS = load_labelled(DATASETS / "routes")
ODD_TEXTS = [
    "",
    "a",
    "  lots   of\tspaces\n\nand lines  ",
    "Ünïcödé àccents — Gdańsk, Schönhauser Allee; ёлка",
    "ok",
    "x" * 3000,
    "€15 $20 #O-1001 ana.novak@example.com 😀",
    "İADE ΟΔΟΣ Σ e\u0301\u0327 ﬁ ① 환불",
    "refund \udcff: bytes a shell could not decode, as a CLI argument carries them",
]


@pytest.fixture(scope="module")
def fitted() -> tuple:
    train = select_split(ROWS, "train")[::3]  # equality needs a real vocabulary, not all rows
    pipeline = build_pipeline(TrainOptions())
    pipeline.fit([r.text for r in train], label_indices([r.label for r in train]))
    fitted = artifact_from_fitted(
        pipeline.named_steps["features"],
        pipeline.named_steps["classifier"],
        temperature=1.7,
        meta={},
    )
    artifact = json.loads(json.dumps(fitted, sort_keys=True))
    return pipeline, LinearRouteScorer(artifact)


def test_fast_path_equals_the_scikit_learn_pipeline(fitted: tuple) -> None:
    pipeline, scorer = fitted
    texts = [r.text for r in ROWS[::2]] + ODD_TEXTS
    reference_logits = pipeline.decision_function(texts)
    fast_logits = np.array([scorer.logits(t) for t in texts])
    np.testing.assert_allclose(fast_logits, reference_logits, rtol=0, atol=1e-9)
    fast_probabilities = softmax(fast_logits, axis=1)
    np.testing.assert_allclose(fast_probabilities, pipeline.predict_proba(texts), rtol=0, atol=1e-9)


def test_a_message_and_its_clauses_scored_together_equal_one_at_a_time(fitted: tuple) -> None:
    from router.models.local.clauses import split_clauses
    from router.models.local.model import prepare_text

    _, scorer = fitted
    for text in [r.text for r in ROWS[::5]] + ODD_TEXTS:
        stripped = prepare_text(text)
        group = [stripped, *split_clauses(stripped), ""]
        one_at_a_time = np.array([scorer.logits(t) for t in group])
        np.testing.assert_allclose(scorer.sparse_logits(group), one_at_a_time, rtol=0, atol=1e-9)


def test_temperature_is_applied_to_the_logits(fitted: tuple) -> None:
    pipeline, scorer = fitted
    text = ROWS[0].text
    expected = softmax(pipeline.decision_function([text])[0] / 1.7)
    np.testing.assert_allclose(scorer.probabilities(text), expected, atol=1e-12)


def test_fit_temperature_recovers_a_known_temperature() -> None:
    rng = np.random.default_rng(7)
    true_logits = rng.normal(scale=3.0, size=(20000, 4))
    labels = np.array([rng.choice(4, p=softmax(row)) for row in true_logits])
    assert fit_temperature(true_logits * 2.5, labels) == pytest.approx(2.5, rel=0.05)


def test_same_data_gives_the_same_artifact(tmp_path: Path) -> None:
    rows = ROWS[::32]  # determinism needs no more; the data grew eightfold
    args = ([r.text for r in rows], [r.label for r in rows])
    tags = [r.tags for r in rows]
    sha_a = save_artifact(train_artifact(*args, tags=tags, data_sha="x")[0], tmp_path / "a.json")
    sha_b = save_artifact(train_artifact(*args, tags=tags, data_sha="x")[0], tmp_path / "b.json")
    assert sha_a == sha_b
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_cross_fitted_probabilities_are_out_of_fold() -> None:
    """The returned probabilities come from models that never saw the row's label.

    The final model, fitted on every row, gives its own training rows' labels clearly
    higher probability; out-of-fold probabilities must not look like that.
    """
    rows = ROWS[::16]
    texts, labels = [r.text for r in rows], [r.label for r in rows]
    artifact, out_of_fold = train_artifact(texts, labels, tags=[r.tags for r in rows])
    in_sample = LocalRouteModel(artifact, "in-sample").probabilities_batch(texts)
    y = label_indices(labels)
    rows_index = np.arange(len(y))
    assert out_of_fold.shape == (len(texts), len(ROUTES))
    np.testing.assert_allclose(out_of_fold.sum(axis=1), 1.0)
    assert in_sample[rows_index, y].mean() > out_of_fold[rows_index, y].mean() + 0.05
    assert artifact["training"]["cross_fit_folds"] == 5
    assert artifact["training"]["n_rows"] == len(texts)


def test_artifact_round_trip_scores_like_the_trained_model(trained: TrainResult) -> None:
    model = LocalRouteModel.load(trained.model_path)
    assert trained.artifact_sha.startswith(model.name.split("@")[1])
    scores = model.score("my teapot arrived broken, I want my money back")
    assert set(scores.probabilities) == set(ROUTES)
    assert sum(scores.probabilities.values()) == pytest.approx(1.0)
    assert scores.choice == "refund"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"format": "something-else"}', "not a local route model"),
        (b'{"format": "support-router/local-route-model", "format_version": 99}', "retrain"),
    ],
)
def test_bad_artifacts_are_refused_with_a_clear_message(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "model.json"
    path.write_bytes(content)
    with pytest.raises(ArtifactError, match=message):
        LocalRouteModel.load(path)


def test_second_stage_fast_path_equals_its_scikit_learn_pipeline() -> None:
    from router.models.local.clauses import SECOND_STAGE_FEATURES
    from router.models.local.fitted import second_stage_artifact
    from router.models.local.linear import SecondStage
    from router.models.local.train import second_stage_pipeline

    rng = np.random.default_rng(3)
    width = len(SECOND_STAGE_FEATURES)
    features = rng.normal(size=(400, width)) * rng.uniform(0.1, 5, size=width)
    y = rng.integers(0, len(ROUTES), size=400)
    pipeline = second_stage_pipeline(0.3).fit(features, y)
    spec = json.loads(
        json.dumps(second_stage_artifact(pipeline, SECOND_STAGE_FEATURES, temperature=1.0, meta={}))
    )
    stage = SecondStage(spec)
    np.testing.assert_allclose(
        stage.logits(features), pipeline.decision_function(features), rtol=0, atol=1e-9
    )
    np.testing.assert_allclose(
        stage.probabilities(features), pipeline.predict_proba(features), rtol=0, atol=1e-9
    )
    older = {**spec, "features": spec["features"][:-3]}  # an artifact from an older build
    with pytest.raises(ArtifactError, match="retrain"):
        SecondStage(older)


def test_clause_features_batch_equals_one_message_at_a_time() -> None:
    from router.models.local.clauses import clause_features, clause_features_batch

    rng = np.random.default_rng(5)
    for trial in range(40):
        n = int(rng.integers(1, 8))
        counts = [int(c) for c in rng.integers(0, 5, size=n)]
        whole = rng.normal(size=(n, len(LINEAR_CLASSES))) * 3
        clauses = rng.normal(size=(sum(counts), len(LINEAR_CLASSES))) * 3
        if trial % 2 and len(clauses) > 1:
            clauses[1:] = clauses[0]  # ties: the later clause holds the maximum in both
        tokens = [int(t) for t in rng.integers(0, 30, size=n)]
        clause_tokens = [int(t) for t in rng.integers(1, 15, size=sum(counts))]
        bounds = np.cumsum([0, *counts])
        one_by_one = [
            clause_features(
                whole[i],
                clauses[bounds[i] : bounds[i + 1]],
                tokens[i],
                clause_tokens[bounds[i] : bounds[i + 1]],
            )
            for i in range(n)
        ]
        batch = clause_features_batch(whole, clauses, counts, tokens, clause_tokens)
        np.testing.assert_allclose(batch, one_by_one, rtol=0, atol=1e-12)


def test_a_short_second_clause_is_told_apart_from_a_long_one() -> None:
    """The clause-length features see which clause carries the second route."""
    from router.models.local.clauses import CLAUSE_FEATURES, clause_features

    whole = np.array([3.0, 0.0, 0.0, 1.0, 0.0])
    clauses = np.array([[4.0, 0.0, 0.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0, 0.0]])  # refund, account
    short = dict(zip(CLAUSE_FEATURES, clause_features(whole, clauses, 16, [12, 4]), strict=True))
    long = dict(zip(CLAUSE_FEATURES, clause_features(whole, clauses, 24, [12, 12]), strict=True))
    assert short["second_clause_log_tokens"] == pytest.approx(np.log1p(4))
    assert short["first_clause_log_tokens"] == pytest.approx(np.log1p(12))
    assert short["second_clause_token_share"] == pytest.approx(4 / 16)
    assert long["second_clause_token_share"] == pytest.approx(0.5)


def test_batch_and_single_message_scoring_agree(trained: TrainResult) -> None:
    model = LocalRouteModel.load(trained.model_path)
    texts = [r.text for r in ROWS[::7]] + ODD_TEXTS
    single = np.array([model.probabilities(t) for t in texts])
    np.testing.assert_allclose(model.probabilities_batch(texts), single, rtol=0, atol=1e-12)


def test_parallel_batch_equals_the_in_process_batch(
    trained: TrainResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    import router.models.local.model as local

    monkeypatch.setattr(local, "PARALLEL_MIN_BATCH", 10)
    model = LocalRouteModel.load(trained.model_path)
    texts = [r.text for r in ROWS[::40]]
    np.testing.assert_allclose(
        model.probabilities_batch(texts, processes=2),
        model.probabilities_batch(texts),
        rtol=0,
        atol=1e-12,
    )


def test_the_trained_model_has_a_second_stage(trained: TrainResult) -> None:
    artifact = json.loads(trained.model_path.read_text())
    stage = artifact["second_stage"]
    assert stage["training"]["folds"] == 5
    assert len(stage["features"]) == len(stage["coef"][0])


@pytest.mark.parametrize(
    ("text", "clauses"),
    [
        ("Hi, this is a.b@mail.com. My teapot broke, refund it.", ["My teapot broke, refund it."]),
        ("Hola, soy a.b@mail.com. Quiero un reembolso.", ["Quiero un reembolso."]),
        ("Здравствуйте, это a.b@mail.com. Шлем треснул.", ["Шлем треснул."]),
        ("Hallo, hier ist a.b@mail.com. Bitte Geld zurück.", ["Bitte Geld zurück."]),
        # a request about the e-mail address keeps its verb, so it stays a clause
        ("Please change my email to a.b@mail.com", ["Please change my email to  emailaddr"]),
    ],
)
def test_greeting_and_identity_clauses_are_not_scored_as_requests(
    text: str, clauses: list[str]
) -> None:
    from router.models.local.clauses import split_clauses
    from router.models.local.model import prepare_text

    assert split_clauses(prepare_text(text)) == clauses


def test_a_clause_read_as_two_requests_counts_as_unclear_and_as_its_own_feature() -> None:
    from scipy.special import softmax

    from router.models.local.clauses import CLAUSE_FEATURES, clause_features

    whole = np.zeros(len(LINEAR_CLASSES))
    clauses = np.array([[0.0, 0.0, 0.0, 0.0, 4.0], [2.0, 0.0, 0.0, 0.0, 0.0]])
    features = dict(zip(CLAUSE_FEATURES, clause_features(whole, clauses, 10, [5, 5]), strict=True))
    two_requests = softmax(clauses[0])[4]
    assert features["clause_max_unclear_multi_request"] == pytest.approx(two_requests)
    assert features["clause_max_unclear"] == pytest.approx(two_requests + softmax(clauses[0])[3])
    assert features["whole_logit_unclear"] == pytest.approx(np.log(2.0))
