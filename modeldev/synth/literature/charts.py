"""Chart panels drawn on matplotlib axes in data units.

Bar charts (points, error bars, significance brackets, broken axes, outside legends), line
charts (error bands or bars, reference lines), scatter with a regression line, box and violin
plots, histograms and Kaplan-Meier curves with censor ticks and numbers at risk; with the
axes placement (margins in font sizes) that :mod:`.maps` uses too.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from modeldev.synth.literature.style import GENES, GROUPS, XLABELS, YLABELS, Style


def chart_axes(fig: Figure, st: Style, left=5.5, bottom=3.6, right=1.2, top=1.6, x0=0.0, x1=1.0):  # type: ignore[no-untyped-def]
    """An axes placed with margins given in font sizes, within the figure's [x0, x1] span."""
    w, h = fig.get_size_inches() * st.dpi
    fs = st.fs
    lx = x0 + left * fs / w
    rx = x1 - right * fs / w
    by = bottom * fs / h
    ty = 1 - top * fs / h
    ax = fig.add_axes((lx, by, max(0.05, rx - lx), max(0.05, ty - by)))
    _style_axes(ax, st)
    return ax


def _style_axes(ax, st: Style) -> None:  # type: ignore[no-untyped-def]
    if st.despine:
        ax.spines["top"].set_visible(False)
        ax.spines["right"].set_visible(False)
    ax.locator_params(nbins=4)


def _fit_ylabel(ax, text: str, st: Style) -> None:  # type: ignore[no-untyped-def]
    """The y title, shortened when it would run past its axes (real figures wrap or shorten)."""
    height = ax.get_position().height * ax.figure.get_size_inches()[1] * st.dpi
    if len(text) * 0.6 * st.fs > height * 1.1:
        text = text.split(" (")[0] if len(text.split(" (")[0]) * 0.6 * st.fs <= height else "a.u."
    ax.set_ylabel(text)


def _stars(p: float) -> str:
    return (
        "****"
        if p < 1e-4
        else "***"
        if p < 1e-3
        else "**"
        if p < 0.01
        else "*"
        if p < 0.05
        else "ns"
    )


def _bracket(ax, x0: float, x1: float, y: float, text: str, fs: float) -> None:  # type: ignore[no-untyped-def]
    dy = y * 0.03
    ax.plot([x0, x0, x1, x1], [y, y + dy, y + dy, y], color="k", lw=0.8)
    ax.text((x0 + x1) / 2, y + dy, text, ha="center", va="bottom", fontsize=fs)


def bars(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    n = int(rng.integers(2, 6))
    broken = rng.random() < 0.15
    legend_out = rng.random() < 0.35
    right = 7.0 if legend_out else 1.2
    means = rng.uniform(0.5, 3, n)
    if broken:
        means[-1] = means[:-1].max() * rng.uniform(4, 8)
    errs = means * rng.uniform(0.05, 0.25, n)
    colors = [st.palette[i % len(st.palette)] for i in range(n)]
    hatch_white = rng.random() < 0.3
    xs = np.arange(n)

    def draw(ax):  # type: ignore[no-untyped-def]
        ax.bar(
            xs,
            means,
            yerr=errs,
            color="white" if hatch_white else colors,
            edgecolor=colors if hatch_white else "k",
            lw=0.8,
            capsize=2,
            width=0.7,
            label=None,
        )
        if rng.random() < 0.7:
            for i in range(n):
                k = int(rng.integers(3, 8))
                ax.scatter(
                    xs[i] + rng.uniform(-0.18, 0.18, k),
                    means[i] + rng.normal(0, errs[i] * 1.5, k),
                    s=6,
                    color="k",
                    zorder=3,
                    lw=0,
                )

    w, h = fig.get_size_inches() * st.dpi
    fs = st.fs
    lx, rx = 5.5 * fs / w, 1 - right * fs / w
    by, ty = (6 if n > 2 else 3.6) * fs / h, 1 - 1.6 * fs / h
    broken = broken and rx - lx > 0.2 and ty - by > 0.3  # room for two axes, or one
    if broken:
        mid = by + (ty - by) * 0.62
        low = fig.add_axes((lx, by, rx - lx, mid - by - 0.02))
        high = fig.add_axes((lx, mid + 0.02, rx - lx, ty - mid - 0.02))
        for ax in (low, high):
            _style_axes(ax, st)
            draw(ax)
        top = means[:-1].max() * 1.6
        low.set_ylim(0, top)
        high.set_ylim(means[-1] * 0.7, means[-1] * 1.35)
        high.spines["bottom"].set_visible(False)
        high.set_xticks([])
        for ax, y in ((low, 1), (high, 0)):
            ax.plot(
                [-0.02, 0.02],
                [y - 0.02, y + 0.02],
                transform=ax.transAxes,
                color="k",
                lw=0.8,
                clip_on=False,
            )
        ax = low
    else:
        ax = chart_axes(fig, st, right=right, bottom=6 if n > 2 else 3.6)
        draw(ax)
        top = (means + errs).max()
        for j in range(1, min(n, 3)):
            y = top * (1.08 + 0.12 * j)
            _bracket(ax, 0, j, y, _stars(float(rng.uniform(0, 0.06))), st.font_pt)
        ax.set_ylim(0, top * (1.25 + 0.12 * min(n, 3)))
    ax.set_xticks(xs)
    ax.set_xticklabels(
        list(rng.choice(GROUPS, n, replace=False)),
        rotation=45 if n > 2 else 0,
        ha="right" if n > 2 else "center",
    )
    _fit_ylabel(low if broken else ax, str(rng.choice(YLABELS)), st)
    if broken:
        low.yaxis.label.set_position((0, 0.8))
    if legend_out:
        handles = [Rectangle((0, 0), 1, 1, color=c) for c in colors]
        fig.legend(
            handles,
            list(rng.choice(GROUPS, n, replace=False)),
            loc="center right",
            frameon=False,
            fontsize=st.font_pt,
            handlelength=1,
        )


def lines(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    legend_out = rng.random() < 0.3
    ax = chart_axes(fig, st, right=7.5 if legend_out else 1.2)
    k = int(rng.integers(1, 5))
    x = np.linspace(0, float(rng.choice([24, 48, 72, 144, 10])), int(rng.integers(6, 30)))
    markers = rng.random() < 0.5
    for i in range(k):
        y = np.cumsum(rng.normal(rng.uniform(-0.2, 0.6), 0.3, x.size)) + i
        e = rng.uniform(0.1, 0.5, x.size)
        c = st.palette[i % len(st.palette)]
        if rng.random() < 0.5:
            ax.fill_between(x, y - e, y + e, color=c, alpha=0.25, lw=0)
            ax.plot(
                x, y, color=c, lw=1.2, marker="o" if markers else None, ms=3, label=f"{GROUPS[i]}"
            )
        else:
            ax.errorbar(
                x,
                y,
                yerr=e,
                color=c,
                lw=1,
                marker="o" if markers else None,
                ms=3,
                capsize=2,
                label=f"{GROUPS[i]}",
            )
    if rng.random() < 0.35:
        for xv in rng.uniform(x[1], x[-2], int(rng.integers(1, 3))):
            ax.axvline(float(xv), color="0.4", ls="--", lw=0.8)
    if rng.random() < 0.2:
        ax.axhline(0, color="0.5", ls=":", lw=0.8)
    ax.set_xlabel(str(rng.choice(XLABELS)))
    _fit_ylabel(ax, str(rng.choice(YLABELS)), st)
    if k > 1:
        if legend_out:
            ax.legend(
                loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False, fontsize=st.font_pt
            )
        else:
            ax.legend(frameon=False, fontsize=st.font_pt * 0.9, loc="best")


def scatter(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    ax = chart_axes(fig, st)
    n = int(rng.integers(15, 150))
    x = rng.normal(0, 1, n)
    r = rng.uniform(-0.9, 0.9)
    y = r * x + rng.normal(0, np.sqrt(1 - r * r), n)
    ax.scatter(x, y, s=8, color=st.palette[0], alpha=0.7, lw=0)
    b, a = np.polyfit(x, y, 1)
    xs = np.array([x.min(), x.max()])
    ax.plot(xs, a + b * xs, color="k" if rng.random() < 0.5 else st.palette[3], lw=1.2)
    ax.text(
        0.05,
        0.95,
        f"r = {r:.2f}\np < 0.00{int(rng.integers(1, 9))}",
        transform=ax.transAxes,
        va="top",
        fontsize=st.font_pt,
    )
    ax.set_xlabel(f"{rng.choice(GENES)} (log2)")
    _fit_ylabel(ax, f"{rng.choice(GENES)} (log2)", st)


def boxviolin(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    n = int(rng.integers(2, 6))
    ax = chart_axes(fig, st, bottom=6 if n > 2 else 3.6)
    data = [
        rng.normal(rng.uniform(1, 4), rng.uniform(0.3, 1), int(rng.integers(12, 50)))
        for _ in range(n)
    ]
    if rng.random() < 0.5:
        parts = ax.violinplot(data, showextrema=False)
        for i, body in enumerate(parts["bodies"]):
            body.set_facecolor(st.palette[i % len(st.palette)])
            body.set_alpha(0.6)
        ax.boxplot(data, widths=0.12, showfliers=False, medianprops={"color": "k"})
    else:
        ax.boxplot(data, widths=0.5, showfliers=False, medianprops={"color": st.palette[3]})
    for i, d in enumerate(data):
        ax.scatter(i + 1 + rng.uniform(-0.12, 0.12, d.size), d, s=4, color="0.2", lw=0, zorder=3)
    top = max(d.max() for d in data)
    if rng.random() < 0.7:
        _bracket(ax, 1, 2, top * 1.05, _stars(float(rng.uniform(0, 0.06))), st.font_pt)
        ax.set_ylim(top=top * 1.2)
    ax.set_xticks(range(1, n + 1))
    ax.set_xticklabels(
        list(rng.choice(GROUPS, n, replace=False)),
        rotation=45 if n > 2 else 0,
        ha="right" if n > 2 else "center",
    )
    _fit_ylabel(ax, str(rng.choice(YLABELS)), st)


def histogram(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    ax = chart_axes(fig, st)
    for i in range(int(rng.integers(1, 3))):
        ax.hist(
            rng.normal(rng.uniform(0, 3), rng.uniform(0.5, 1.2), 400),
            bins=int(rng.integers(15, 40)),
            color=st.palette[i],
            alpha=0.6,
            edgecolor="k" if rng.random() < 0.4 else None,
            lw=0.4,
        )
    ax.set_xlabel(str(rng.choice(XLABELS)))
    ax.set_ylabel("Count")


def survival(rng: np.random.Generator, fig: Figure, st: Style) -> None:
    k = int(rng.integers(2, 4))
    ax = chart_axes(fig, st, left=7, bottom=5.8 + 1.3 * k)
    tmax = float(rng.choice([60, 100, 36, 120]))
    times = np.linspace(0, tmax, 5)
    for i in range(k):
        t = np.sort(rng.exponential(tmax * rng.uniform(0.4, 1.5), int(rng.integers(20, 60))))
        t = t[t < tmax]
        s = np.concatenate([[1.0], np.cumprod(1 - 1 / np.arange(len(t) + 20, 20, -1))])
        c = st.palette[i % len(st.palette)]
        ax.step(np.concatenate([[0], t]), s, where="post", color=c, lw=1.2, label=GROUPS[i])
        cens = rng.choice(len(t), min(len(t), 5), replace=False) if len(t) else []
        ax.plot(t[cens], s[np.asarray(cens) + 1] if len(t) else [], "|", color=c, ms=5)
        below = -(4.6 + 1.3 * i) * st.font_pt
        for tt in times:
            ax.annotate(
                str(int((t > tt).sum() + 20)),
                (tt, 0),
                xycoords=("data", "axes fraction"),
                xytext=(0, below),
                textcoords="offset points",
                ha="center",
                fontsize=st.font_pt * 0.85,
                color=c,
            )
        ax.annotate(
            GROUPS[i],
            (0, 0),
            xycoords="axes fraction",
            xytext=(-3 * st.font_pt, below),
            textcoords="offset points",
            ha="right",
            fontsize=st.font_pt * 0.85,
            color=c,
        )
    ax.annotate(
        "No. at risk",
        (0, 0),
        xycoords="axes fraction",
        xytext=(-3 * st.font_pt, -3.4 * st.font_pt),
        textcoords="offset points",
        ha="right",
        fontsize=st.font_pt * 0.85,
    )
    ax.set_ylim(0, 1.05)
    ax.set_xlim(0, tmax)
    ax.set_xticks(times)
    ax.set_xlabel("Months")
    ax.set_ylabel("Survival probability")
    ax.legend(frameon=False, fontsize=st.font_pt, loc="upper right")
    ax.text(
        0.05,
        0.08,
        f"log-rank p = 0.0{int(rng.integers(1, 5))}",
        transform=ax.transAxes,
        fontsize=st.font_pt,
    )
