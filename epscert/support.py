"""What epscert supports: mechanism × sampler × method → the guarantee its numbers carry.

This is the one table. :data:`epscert.names.SUPPORTED_METHODS` (what a configuration accepts),
:data:`epscert.inverse.best.CANDIDATES` (what ``epscert epsilon``, ``Accountant`` and a sweep's
``method: auto`` try, in order) and the support matrix in ``docs/support_matrix.md`` (written by
``python -m pipelines.support_matrix``, checked by ``tests/core/test_support_matrix.py``) are all read from
it, so they cannot drift apart.

It holds names (strings) only, so that the ground floor (:mod:`epscert.names`) can read it
without an import cycle. Adding a mechanism is one place: an entry in :data:`MECHANISMS`, its rows in
:func:`_rows` (``add(sampler, method, guarantee, note, mechanism="bandmf")``) and its candidates in
:data:`CANDIDATES`; a configuration with a ``mechanism`` field validates its method against
``methods_for(sampler, mechanism)``, and the docs page and its test pick the new rows up by themselves.

Guarantees (:data:`GUARANTEES`): ``exact`` (a closed form, evaluated outward); ``bracket`` (a
deterministic upper and lower bound, the true δ(ε) between them); ``upper_bound`` (deterministic,
one-sided); ``mc_ucb`` (a Monte Carlo upper confidence bound, wrong with probability at most β);
``lower_bound`` (only a lower bound: it can show that ε is at least something, never certify);
``conjecture`` (Monte Carlo on a pair that is tight only under a conjecture: certifies nothing).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

#: The mechanisms, with what each is. DP-SGD: the Gaussian mechanism with independent noise at
#: every step, clipped per-example gradients of norm <= 1 (SPEC §1).
MECHANISMS: Mapping[str, str] = {
    "dpsgd": "DP-SGD: the Gaussian mechanism, independent noise N(0, σ²) at every step (SPEC §1)",
    "bandmf": ("DP-FTRL / BandMF: the matrix mechanism y = C x + σ z with a lower-triangular strategy C (banded "
               "Toeplitz by c_col, or dense from a .npy file) over n iterations, Balls-and-Bins batches of cycle "
               "length b (each example keeps one bin for every cycle: sampler balls_and_bins_persistent); the "
               "dominating pair (1/b) Σ_j N(C x_j, σ²I) vs N(0, σ²I) (docs/matrix_mechanism.md)"),
}
DEFAULT_MECHANISM = "dpsgd"
#: The sampler of a matrix mechanism (each example keeps one bin for every cycle).
MATRIX_SAMPLER = "balls_and_bins_persistent"

#: Short names of the guarantees in the matrix's cells.
LABELS: Mapping[str, str] = {"exact": "exact", "bracket": "bracket", "upper_bound": "upper bound",
                             "mc_ucb": "MC UCB", "lower_bound": "lower bound only", "conjecture": "conjecture"}
#: What each guarantee means (the docs print these).
GUARANTEES: Mapping[str, str] = {
    "exact": "exact: a closed form, evaluated with an outward rounding",
    "bracket": "bracket: a deterministic upper and lower bound; the true δ(ε) lies between them",
    "upper_bound": "upper bound: deterministic, one-sided",
    "mc_ucb": "Monte Carlo UCB: a certified upper confidence bound, wrong with probability at most β",
    "lower_bound": "lower bound only: shows ε is at least this much, certifies nothing",
    "conjecture": "conjecture: a Monte Carlo estimate on a pair that is tight only under a conjecture",
}

#: The Balls-and-Bins PLD bracket's range (epscert.allocation): σ >= BRACKET_MIN_SIGMA, T <= BRACKET_MAX_STEPS,
#: E <= BRACKET_MAX_EPOCHS. Why the σ floor is where it is (it was 0.3 before issue 35, a tightness target,
#: never a soundness condition):
#: - the proof assumes nothing about σ: contraction and spread bound the law for any cells, the cap
#:   terms hold for any cap c, and the grid only decides the width (epscert/allocation/cells.py, grid.py);
#: - what σ does limit is the float range of the base law of W = exp(Z/σ − 1/(2σ²)): its cap
#:   log c ≈ (8.6 + 1/(2σ))/σ and its first edge log w_lo ≈ −(8.8 + 1/(2σ))/σ (default cap budget and
#:   tau, T·E up to 10^9) must stay inside the cells' normal range [2^-960, 2^1000] for the relative
#:   rounding model; they reach it at σ ≈ 0.035. The base law now clamps both (LOG_CAP_LIMIT,
#:   LOG_FLOOR_LIMIT in epscert/allocation/tails.py; still sound, only looser) and drops or spreads a
#:   cell whose mass or moment is near the subnormal range, so no σ breaks the argument;
#: - 0.05 is the lowest σ where no clamp acts at the default settings (log c <= 372, log w_lo >= −375,
#:   every cell's moment >= 1e-182) and where the bracket is checked against independent values
#:   (T = 1 closed form, T = 2, 3 quadrature, naive Monte Carlo: tests/allocation/test_small_sigma.py).
#:   Already at σ = 0.05 the run is nearly transparent (T = 10^6, E = 1: δ(2) >= 0.9999995 by the
#:   bracket's lower side; σ = 0.1, T = 10^6: δ(2) >= 0.9995). In 0.05 <= σ < 0.3 the bracket is sound everywhere, and tight where the
#:   chains keep their mass: over many epochs at small σ (e.g. σ = 0.1, T = 10^3, E = 1000) the lower
#:   chain loses its atoms to the float range and its lower bound falls to 0 (the true δ is near 1).
BRACKET_MIN_SIGMA = 0.05
BRACKET_MAX_STEPS = 10**6
BRACKET_MAX_EPOCHS = 1000
BRACKET_RANGE = (f"σ >= {BRACKET_MIN_SIGMA:g}, T <= 10^{len(str(BRACKET_MAX_STEPS)) - 1}, "
                 f"E <= {BRACKET_MAX_EPOCHS}")


@dataclasses.dataclass(frozen=True)
class Support:
    """One supported (mechanism, sampler, method) and the guarantee of its numbers."""

    mechanism: str
    sampler: str
    method: str
    guarantee: str
    note: str = ""


def _rows() -> tuple[Support, ...]:
    rows = []

    def add(sampler: str, method: str, guarantee: str, note: str = "", mechanism: str = DEFAULT_MECHANISM):
        rows.append(Support(mechanism, sampler, method, guarantee, note))

    for sampler in ("balls_and_bins", "balls_and_bins_persistent"):
        persistent = sampler.endswith("_persistent")
        reduced = "certified as one epoch of balls_and_bins at σ/√E; " if persistent else ""
        add(sampler, "bracket_upper", "bracket", reduced + BRACKET_RANGE + " (alias: pld_upper)")
        add(sampler, "bracket_lower", "bracket", reduced + BRACKET_RANGE + " (alias: pld_lower)")
        add(sampler, "naive", "mc_ucb", reduced.rstrip("; "))
        add(sampler, "importance", "mc_ucb", "one epoch" if not persistent else reduced.rstrip("; "))
        add(sampler, "order_stats", "mc_ucb", reduced.rstrip("; "))
        add(sampler, "importance_order_stats", "mc_ucb", "one epoch" if not persistent else reduced.rstrip("; "))
        if not persistent:
            add(sampler, "conditional", "mc_ucb", "one epoch")
            add(sampler, "conditional_order_stats", "mc_ucb", "one epoch")
        add(sampler, "cube_lower_bound", "lower_bound", "E > 1: the sliced max-statistic PLD composed E times")
    add("poisson", "pld_upper", "bracket", "PLD bracket, upper side: connect-the-dots PMF, tilted FFT composition "
        "with a relative error bound (RDP where smaller)")
    add("poisson", "pld_lower", "bracket", "PLD bracket, lower side: merged post-processing PMF, same composition")
    add("poisson", "rdp_upper", "upper_bound", "dp_accounting RDP; δ(ε) only")
    add("poisson", "naive", "mc_ucb")
    add("deterministic", "exact", "exact", "Gaussian closed form at σ/√E")
    add("deterministic", "naive", "mc_ucb")
    add("deterministic", "importance", "mc_ucb", "one epoch")
    for sampler in ("shuffle", "shuffle_persistent"):
        add(sampler, "naive", "conjecture", "the shuffle pair is tight only under a conjecture (SPEC §1)")
        add(sampler, "cube_lower_bound", "lower_bound")
    bandmf = dict(mechanism="bandmf")
    add(MATRIX_SAMPLER, "naive", "mc_ucb", "privacy losses from the b × b Gram matrix of the modes", **bandmf)
    add(MATRIX_SAMPLER, "importance", "mc_ucb", "value estimator (REMOVE: ALOE over the bins; ADD: truncated mean); "
        "two-sided (LCB and UCB)", **bandmf)
    add(MATRIX_SAMPLER, "conditional", "mc_ucb", "conditional value estimator (REMOVE: stratified lines, ADD: mean "
        "line); two-sided (LCB and UCB)", **bandmf)
    add(MATRIX_SAMPLER, "tilted", "mc_ucb", "loss-tilted value estimator (REMOVE: proposal ∝ e^{θL} Q, values "
        "within the Rényi bound; ADD: mean line); two-sided (LCB and UCB)", **bandmf)
    add(MATRIX_SAMPLER, "comonotone_upper_bound", "upper_bound", "the Gaussian of the largest mode norm: "
        "deterministic and loose", **bandmf)
    add(MATRIX_SAMPLER, "independent_lower_bound", "lower_bound", "modes taken as independent Balls-and-Bins "
        "steps: the bracket's lower side at the smallest mode norm", **bandmf)
    add(MATRIX_SAMPLER, "bracket_upper", "bracket", "C = c·I and b dividing n only (the pair is then Balls-and-Bins); "
        + BRACKET_RANGE + " at σ/(c√(n/b))", **bandmf)
    add(MATRIX_SAMPLER, "bracket_lower", "bracket", "C = c·I and b dividing n only", **bandmf)
    add(MATRIX_SAMPLER, "exact", "exact", "b = 1: the Gaussian mechanism of the one mode", **bandmf)
    return tuple(rows)


#: Every supported (mechanism, sampler, method) with its guarantee. ``auto`` is not a row: it is
#: a choice among these (:data:`CANDIDATES` for the certified answer, Monte Carlo for ``certify``).
TABLE: tuple[Support, ...] = _rows()

#: Per (mechanism, sampler): the methods whose numbers certify an upper bound, in the order the
#: entry points try them (:func:`epscert.inverse.best.best_certificate`). ``auto`` stands for the
#: configuration's Monte Carlo method; ``exact`` on a sampler other than ``deterministic`` stands
#: for the deterministic curve by domination (an upper bound for samplers with one participation
#: per epoch; see epscert.inverse.best).
CANDIDATES: Mapping[tuple[str, str], tuple[str, ...]] = {
    (DEFAULT_MECHANISM, "poisson"): ("pld_upper", "rdp_upper"),
    (DEFAULT_MECHANISM, "deterministic"): ("exact",),
    (DEFAULT_MECHANISM, "balls_and_bins"): ("bracket_upper", "auto", "exact"),
    (DEFAULT_MECHANISM, "balls_and_bins_persistent"): ("bracket_upper", "auto", "exact"),
    (DEFAULT_MECHANISM, "shuffle"): ("exact",),
    (DEFAULT_MECHANISM, "shuffle_persistent"): ("exact",),
    # a matrix mechanism: the comonotone bound does not stop its Monte Carlo (it is loose)
    ("bandmf", MATRIX_SAMPLER): ("bracket_upper", "comonotone_upper_bound", "auto"),
}

#: Old method names still accepted, per sampler: the Balls-and-Bins bracket was called
#: ``pld_upper``/``pld_lower`` (the names of Poisson's dp_accounting PLD) before it had its own.
ALIASES: Mapping[tuple[str, str], str] = {
    (sampler, old): new
    for sampler in ("balls_and_bins", "balls_and_bins_persistent")
    for old, new in (("pld_upper", "bracket_upper"), ("pld_lower", "bracket_lower"))
}


def samplers(mechanism: str = DEFAULT_MECHANISM) -> tuple[str, ...]:
    """The samplers of ``mechanism``, in table order."""
    return tuple(dict.fromkeys(r.sampler for r in TABLE if r.mechanism == mechanism))


def methods_for(sampler: str, mechanism: str = DEFAULT_MECHANISM) -> tuple[str, ...]:
    """The methods supported for (mechanism, sampler), in table order (``auto`` not included)."""
    return tuple(r.method for r in TABLE if r.mechanism == mechanism and r.sampler == sampler)


def guarantee_of(sampler: str, method: str, mechanism: str = DEFAULT_MECHANISM) -> str:
    """The guarantee of (mechanism, sampler, method); ValueError if the table has no such row."""
    method = ALIASES.get((sampler, method), method)
    for r in TABLE:
        if (r.mechanism, r.sampler, r.method) == (mechanism, sampler, method):
            return r.guarantee
    raise ValueError(f"method={method!r} is not supported for sampler={sampler!r} with mechanism={mechanism!r}")


def canonical_method(sampler: str, method: str) -> str:
    """The current name of ``method`` for ``sampler`` (old names in :data:`ALIASES`)."""
    return ALIASES.get((sampler, method), method)


# ---- the docs page ---------------------------------------------------------------------------

def _answer(mechanism: str, sampler: str) -> str:
    """What the certified answer (``epscert epsilon``, sweep ``method: auto``) tries, in words."""
    words = {"bracket_upper": f"the PLD bracket ({BRACKET_RANGE})", "pld_upper": "the Poisson PLD bracket (upper side)",
             "rdp_upper": "RDP (δ(ε) only)", "auto": "Monte Carlo UCB (where nothing analytic answers)"}
    if mechanism == "bandmf":
        words.update(bracket_upper="the Balls-and-Bins PLD bracket (C = c·I, b divides n)",
                     comonotone_upper_bound="the comonotone Gaussian (upper bound)",
                     auto="Monte Carlo loss-tilted UCB (run unless the bracket answered)")
    parts = []
    for m in CANDIDATES.get((mechanism, sampler), ()):
        if m == "exact":
            parts.append("exact" if sampler == "deterministic" else "the deterministic ε by domination (upper bound)")
        else:
            parts.append(words.get(m, m))
    return ", then ".join(parts) if parts else "none: lower bounds only"


def render_markdown() -> str:
    """The support matrix as Markdown (``docs/support_matrix.md`` holds exactly this text)."""
    out = ["# Support matrix", "",
           "Generated from `epscert/support.py` by `python -m pipelines.support_matrix > docs/support_matrix.md`;",
           "`tests/core/test_support_matrix.py` fails when this page and the code differ.", "",
           "## Guarantees", ""]
    out += [f"- **{LABELS[key]}** (`{key}`): {text.split(': ', 1)[1]}" for key, text in GUARANTEES.items()]
    out += ["", "## Mechanisms", ""]
    out += [f"- `{key}`: {text}" for key, text in MECHANISMS.items()]
    for mechanism in MECHANISMS:
        names = samplers(mechanism)
        methods = tuple(dict.fromkeys(r.method for r in TABLE if r.mechanism == mechanism))
        out += ["", f"## Mechanism `{mechanism}`: sampler × method", "",
                "| sampler | " + " | ".join(f"`{m}`" for m in methods) + " |",
                "|---|" + "---|" * len(methods)]
        for sampler in names:
            cells = []
            for m in methods:
                row = next((r for r in TABLE if (r.mechanism, r.sampler, r.method) == (mechanism, sampler, m)), None)
                cells.append(LABELS[row.guarantee] if row else "")
            out.append(f"| `{sampler}` | " + " | ".join(cells) + " |")
        out += ["", f"### The certified answer (`epscert epsilon`, `Accountant`, sweep `method: auto`), `{mechanism}`", "",
                "| sampler | tried in this order (the smallest finite certified value wins) |", "|---|---|"]
        out += [f"| `{s}` | {_answer(mechanism, s)} |" for s in names]
        out += ["", f"### Conditions and notes, `{mechanism}`", "", "| sampler | method | guarantee | note |",
                "|---|---|---|---|"]
        out += [f"| `{r.sampler}` | `{r.method}` | {LABELS[r.guarantee]} | {r.note} |" for r in TABLE
                if r.mechanism == mechanism]
    out += ["", "`certify --method auto` (and `epscert.certify(method='auto')`) picks a Monte Carlo method: "
            "`importance` for one epoch and T < 2000, `importance_order_stats` for one epoch and T >= 2000, "
            "`naive` or `order_stats` for several epochs (Balls-and-Bins); `importance` (one epoch) or `naive` "
            "(deterministic); `tilted` for a matrix mechanism (bandmf); `naive` otherwise.", ""]
    return "\n".join(out)

