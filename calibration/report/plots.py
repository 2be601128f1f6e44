"""The report's PNG plots (matplotlib, Agg backend: no display, no network).

Each function takes plain arrays and writes one file; `calibration.report.policy_report`
decides what to plot and describes each plot in words.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from router.contracts import ROUTES  # noqa: E402

DPI = 110


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def reliability_bins(top: np.ndarray, correct: np.ndarray, *, n_bins: int = 15
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean top probability, accuracy and count per equal-width bin (NaN when empty)."""
    bins = np.clip((top * n_bins).astype(int), 0, n_bins - 1)
    counts = np.bincount(bins, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_top = np.bincount(bins, weights=top, minlength=n_bins) / counts
        accuracy = np.bincount(bins, weights=correct.astype(float), minlength=n_bins) / counts
    return mean_top, accuracy, counts


def plot_reliability(panels: dict[str, tuple[np.ndarray, np.ndarray]], path: Path,
                     *, n_bins: int = 15) -> Path:
    """One reliability diagram per panel name → (top probability (n,), correct (n,))."""
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.6), squeeze=False)
    edges = np.linspace(0, 1, n_bins + 1)
    for ax, (title, (top, correct)) in zip(axes[0], panels.items(), strict=True):
        mean_top, accuracy, counts = reliability_bins(top, correct, n_bins=n_bins)
        filled = counts > 0
        ax.bar(edges[:-1][filled], accuracy[filled], width=1 / n_bins, align="edge",
               color="#4c72b0", edgecolor="white", label="accuracy in bin")
        ax.bar(edges[:-1][filled], (mean_top - accuracy)[filled], bottom=accuracy[filled],
               width=1 / n_bins, align="edge", color="#dd8452", alpha=0.45,
               label="gap to mean top probability")
        ax.plot([0, 1], [0, 1], color="black", lw=1, ls="--", label="perfect calibration")
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="top probability (15 equal-width bins)",
               ylabel="accuracy", title=title)
        ax.legend(loc="upper left", fontsize=8)
    return _save(fig, path)


def plot_risk_coverage(coverage: np.ndarray, risk: np.ndarray, thresholds: np.ndarray, *,
                       alpha: float, chosen: tuple[float, float] | None,
                       certified_bound: float | None, path: Path) -> Path:
    """Misroute rate among routed vs coverage over the threshold grid, with the policy point."""
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    ax.plot(coverage, risk, marker=".", ms=3, color="#4c72b0", label="test rows, over thresholds")
    for value in (0.9, 0.7, 0.5, 0.3):
        j = int(np.argmin(np.abs(thresholds - value)))
        ax.annotate(f"λ={thresholds[j]:.1f}", (coverage[j], risk[j]), fontsize=7,
                    textcoords="offset points", xytext=(4, 4))
    ax.axhline(alpha, color="#c44e52", ls="--", lw=1, label=f"α = {alpha:g}")
    if chosen is not None:
        x, y = chosen
        ax.plot([x], [y], marker="o", color="black", label="policy threshold (test rows)")
        if certified_bound is not None:
            ax.errorbar([x], [y], yerr=np.array([[0.0], [max(0.0, certified_bound - y)]]),
                        color="black",
                        capsize=4, label="upper bound from certify rows")
    ax.set(xlabel="coverage (routed clear requests / clear requests)",
           ylabel="misroute rate among routed", xlim=(0, 1.02), ylim=(0, None),
           title="Risk–coverage")
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_confusion(matrix: np.ndarray, rows: list[str], columns: list[str], path: Path) -> Path:
    """Counts of true label (rows) × decision (columns)."""
    fig, ax = plt.subplots(figsize=(5.6, 4.6))
    ax.imshow(matrix, cmap="Blues")
    ax.set_xticks(range(len(columns)), columns)
    ax.set_yticks(range(len(rows)), rows)
    ax.set(xlabel="decision at the policy", ylabel="label", title="Confusion at the policy")
    high = matrix.max() if matrix.size else 0
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            ax.text(j, i, str(int(matrix[i, j])), ha="center", va="center",
                    color="white" if matrix[i, j] > high / 2 else "black")
    return _save(fig, path)


def plot_confidence_histograms(labels: np.ndarray, confidences: np.ndarray, correct: np.ndarray,
                               *, threshold: float, path: Path) -> Path:
    """Confidence histograms per true label, split by whether the choice was right."""
    fig, axes = plt.subplots(1, len(ROUTES), figsize=(4.0 * len(ROUTES), 3.6), sharey=False)
    bins = np.linspace(0, 1, 21)
    for ax, route in zip(axes, ROUTES, strict=True):
        mask = labels == route
        ax.hist([confidences[mask & correct], confidences[mask & ~correct]], bins=bins,
                stacked=True, color=["#55a868", "#c44e52"], label=["choice right", "choice wrong"])
        ax.axvline(threshold, color="black", ls="--", lw=1, label=f"threshold {threshold:.2f}")
        ax.set(title=f"label {route} (n={int(mask.sum())})", xlabel="confidence", xlim=(0, 1))
    axes[0].set_ylabel("requests")
    axes[0].legend(fontsize=7)
    return _save(fig, path)


def plot_transitions(matrix: np.ndarray, categories: list[str], path: Path, *,
                     names: tuple[str, str] = ("A", "B")) -> Path:
    """Paired plot of outcome transitions: stacked bars for A and B joined by bands whose
    width is the number of requests that moved from A's outcome (left) to B's (right)."""
    matrix = np.asarray(matrix, dtype=float)
    total = matrix.sum() or 1.0
    colors = ["#55a868", "#c44e52", "#8c8c8c", "#4c72b0", "#dd8452"]
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    left_tops = np.concatenate([[0.0], np.cumsum(matrix.sum(axis=1))]) / total
    right_tops = np.concatenate([[0.0], np.cumsum(matrix.sum(axis=0))]) / total
    left_used, right_used = left_tops[:-1].copy(), right_tops[:-1].copy()
    for i in range(len(categories)):
        for j in range(len(categories)):
            h = matrix[i, j] / total
            if h == 0:
                continue
            ys = np.linspace(0, 1, 50)
            smooth = 3 * ys**2 - 2 * ys**3
            lower = left_used[i] + (right_used[j] - left_used[i]) * smooth
            ax.fill_between(0.1 + 0.8 * ys, lower, lower + h, color=colors[i % 5],
                            alpha=0.25 if i == j else 0.6, lw=0)
            left_used[i] += h
            right_used[j] += h
    for x, tops in ((0.0, left_tops), (0.9, right_tops)):
        for k, name in enumerate(categories):
            height = tops[k + 1] - tops[k]
            ax.bar(x, height, bottom=tops[k], width=0.1, align="edge", color=colors[k % 5])
            if height > 0.03:
                count = int(round(height * total))
                ax.text(x + 0.05, tops[k] + height / 2, f"{name}\n{count}", ha="center",
                        va="center", fontsize=7, color="white")
    ax.set_xticks([0.05, 0.95], [f"router {names[0]}", f"router {names[1]}"])
    ax.set(ylim=(1, 0), xlim=(-0.02, 1.02), yticks=[],
           title="Outcome per request: A → B (bands: requests that moved)")
    return _save(fig, path)
