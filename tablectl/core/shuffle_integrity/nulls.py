"""Null distributions of the shuffle-integrity statistics: exact, or bounds that are exact
upper bounds on the tail (so a p-value from here is never smaller than the true one). Pure.

Under a fair shuffle the cards a shoe deals from a deck are a uniformly random ordered
selection of the 52, independent of everything before (docs/shuffle-integrity.md, "Nulls").
Conditional on which cards were dealt, their order is a uniform random permutation; every
distribution below follows from that alone.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

DECK = 52


# --- ascents of a uniform random permutation (Eulerian numbers) ------------------------


@functools.cache
def _eulerian_row(n: int) -> tuple[int, ...]:
    """A(n, k), k = 0..n-1: permutations of n with exactly k ascents (n >= 1)."""
    row = [1]
    for m in range(2, n + 1):
        nxt = [0] * m
        for k in range(m):
            left = (k + 1) * row[k] if k < m - 1 else 0
            right = (m - k) * row[k - 1] if k >= 1 else 0
            nxt[k] = left + right
        row = nxt
    return tuple(row)


@functools.cache
def ascents_pmf(n: int) -> tuple[float, ...]:
    """P(a uniform permutation of n has k ascents), k = 0..max(n-1, 0)."""
    if n <= 1:
        return (1.0,)
    total = math.factorial(n)
    return tuple(a / total for a in _eulerian_row(n))


@functools.cache
def ascents_upper_tail(n: int, k: int) -> float:
    """P(ascents >= k) for a uniform permutation of n: exact."""
    if k <= 0:
        return 1.0
    if n <= 1 or k > n - 1:
        return 0.0
    row = _eulerian_row(n)
    return sum(row[k:]) / math.factorial(n)


# --- alternating runs (up-down runs) of a uniform random permutation --------------------


@functools.cache
def _alternating_runs_row(n: int) -> tuple[int, ...]:
    """R(n, k), k = 0..n-1: permutations of n (n >= 2) with exactly k alternating runs
    (maximal monotone stretches); R(n,k) = k R(n-1,k) + 2 R(n-1,k-1) + (n-k) R(n-1,k-2)
    (David & Barton, Combinatorial Chance, 1962)."""
    row = [0, 2]  # n = 2: one run, either way
    for m in range(3, n + 1):
        nxt = [0] * m
        for k in range(1, m):
            a = k * row[k] if k < len(row) else 0
            b = 2 * row[k - 1] if 1 <= k - 1 < len(row) else 0
            c = (m - k) * row[k - 2] if 1 <= k - 2 < len(row) else 0
            nxt[k] = a + b + c
        row = nxt
    return tuple(row)


@functools.cache
def alternating_runs_pmf(n: int) -> tuple[float, ...]:
    """P(a uniform permutation of n >= 2 has k alternating runs), k = 0..n-1."""
    total = math.factorial(n)
    return tuple(r / total for r in _alternating_runs_row(n))


@functools.cache
def alternating_runs_lower_tail(n: int, k: int) -> float:
    """P(at most k alternating runs): few runs, long monotone stretches (a shelf shuffler's
    rising and falling piles). Exact."""
    if n < 3 or k >= n - 1:
        return 1.0
    return sum(_alternating_runs_row(n)[: k + 1]) / math.factorial(n)


# --- the hypergeometric: how many of this use's cards were dealt last use ---------------


@functools.cache
def hypergeometric_pmf(drawn: int, marked: int) -> tuple[float, ...]:
    """P(k of `drawn` cards are among `marked` given ones), k = 0..min(drawn, marked)."""
    total = math.comb(DECK, drawn)
    top = min(drawn, marked)
    return tuple(
        math.comb(marked, k) * math.comb(DECK - marked, drawn - k) / total for k in range(top + 1)
    )


def hypergeometric_two_sided(drawn: int, marked: int, seen: int) -> float:
    """P(an overlap at least as far from the mean as `seen`, on its side) x 2, capped at 1."""
    pmf = hypergeometric_pmf(drawn, marked)
    mean = drawn * marked / DECK
    tail = sum(pmf[seen:]) if seen >= mean else sum(pmf[: seen + 1])
    return min(1.0, 2.0 * tail)


# --- the binomial: one card at one deal position --------------------------------------


@functools.cache
def binomial_upper_tail(trials: int, k: int, p_num: int = 1, p_den: int = DECK) -> float:
    """P(Binomial(trials, p_num/p_den) >= k): exact (integer arithmetic, then one division)."""
    if k <= 0:
        return 1.0
    if k > trials:
        return 0.0
    q_num = p_den - p_num
    num: int = sum(
        math.comb(trials, j) * p_num**j * q_num ** (trials - j) for j in range(k, trials + 1)
    )
    den: int = p_den**trials
    return num / den


HAND_FEATURES = ("pair", "suited")  # what the seat test counts in a hand, besides its cards


@functools.cache
def hand_feature_chance(feature: str, h: int) -> tuple[int, int]:
    """The exact chance, as (numerator, denominator), that h cards drawn uniformly from the
    52 have the feature: "pair", two (or more) of one rank; "suited", all of one suit."""
    den = math.prod(DECK - i for i in range(h))
    if feature == "pair":
        distinct = math.prod(DECK - 4 * i for i in range(h)) if h <= 13 else 0
        num = den - distinct
    elif feature == "suited":
        num = 4 * math.prod(13 - i for i in range(h)) if h <= 13 else 0
    else:
        raise ValueError(feature)
    g = math.gcd(num, den)
    return num // g, den // g


def hand_features(cards: Sequence[int]) -> tuple[str, ...]:
    """The features (HAND_FEATURES) of a hand of card indices (0..51, factory order)."""
    ranks = [c % 13 for c in cards]
    out: list[str] = []
    if len(set(ranks)) < len(ranks):
        out.append("pair")
    if len({c // 13 for c in cards}) == 1:
        out.append("suited")
    return tuple(out)


# --- runs: cards of one class (a suit, a rank) next to each other in a deal -------------


@functools.cache
def _lah(g: int, j: int) -> int:
    """Ways to arrange g distinct items into j non-empty ordered lists (Lah number)."""
    return math.comb(g - 1, j - 1) * math.factorial(g) // math.factorial(j)


@functools.cache
def adjacencies_upper_tail(classes: tuple[int, ...], k: int) -> float:
    """P(at least k neighbouring pairs of one class) in a uniform ordering of distinct items
    whose classes have these sizes (sorted). Exact: inclusion-exclusion over adjacencies
    forced together, each class glued into j blocks (Lah numbers), the blocks then ordered."""
    n = sum(classes)
    if k <= 0:
        return 1.0
    if k > n - len([g for g in classes if g]):
        return 0.0
    blocks = [1]  # coefficient of z^J: ways to glue the classes so far into J blocks
    for g in classes:
        if g == 0:
            continue
        poly = [0] + [_lah(g, j) for j in range(1, g + 1)]
        out = [0] * (len(blocks) + g)
        for a, ca in enumerate(blocks):
            if ca:
                for b, cb in enumerate(poly):
                    if cb:
                        out[a + b] += ca * cb
        blocks = out
    # forced[r]: sum over permutations of C(adjacencies, r) = arrangements with r forced.
    forced = [0] * n
    for big_j, c in enumerate(blocks):
        if c and big_j:
            forced[n - big_j] += c * math.factorial(big_j)
    # exactly[t] = sum_r (-1)^(r-t) C(r, t) forced[r]
    exactly: list[int] = [
        sum((-1 if (r - t) % 2 else 1) * math.comb(r, t) * forced[r] for r in range(t, n))
        for t in range(n)
    ]
    return sum(exactly[k:]) / math.factorial(n)


# --- a repeated order: bounds by the binomial moment (Markov on C(X, k)) ---------------


def _falling(n: int, k: int) -> int:
    return math.perm(n, k)


@functools.cache
def position_matches_tail(length: int, k: int) -> float:
    """P(at least k of `length` deal positions hold the same card as a given earlier deal)
    <= C(length, k) / (52)_k: each k positions match with probability 1/(52)_k."""
    if k <= 0:
        return 1.0
    if k > length:
        return 0.0
    return min(1.0, math.comb(length, k) / _falling(DECK, k))


@functools.cache
def kept_neighbours_tail(pairs: int, n: int, k: int) -> float:
    """P(at least k of `pairs` given neighbouring pairs (a path, either way round) are
    neighbours again among n dealt cards) <= C(pairs, k) x max over c of the chance that k
    such pairs forming c chains (k + c cards) all appear, each chain as a run either way:
    2^c (n-k)!/(n-k-c)! (52-k-c)!/52!."""
    if k <= 0:
        return 1.0
    if k > min(pairs, n - 1):
        return 0.0
    worst = 0.0
    for c in range(1, k + 1):
        if n - k - c < 0:
            break
        chance = 2**c * _falling(n - k, c) / _falling(DECK, k + c)
        worst = max(worst, chance)
    return min(1.0, math.comb(pairs, k) * worst)


# --- sums over a window: the Chernoff bound -------------------------------------------


def chernoff_upper(pmfs: Sequence[tuple[tuple[float, ...], int]], total: float) -> float:
    """P(sum >= total) for independent variables, each with a pmf on 0, 1, 2, ... (given with
    how many times it occurs): inf over t >= 0 of exp(-t total) prod E[exp(t X)]. A true upper
    bound; minimised by Newton's method on the convex log-MGF."""
    mean = sum(c * sum(k * p for k, p in enumerate(pmf)) for pmf, c in pmfs)
    top = sum(c * (len(pmf) - 1) for pmf, c in pmfs)
    if total <= mean:
        return 1.0
    if total > top:
        return 0.0
    t = 0.5
    best = 0.0  # log of the best bound found
    for _ in range(40):
        log_m, d1, d2 = 0.0, 0.0, 0.0
        for pmf, c in pmfs:
            # Shift by the largest exponent so exp never overflows.
            kmax = len(pmf) - 1
            m0 = m1 = m2 = 0.0
            for k, p in enumerate(pmf):
                if p:
                    w = p * math.exp(t * (k - kmax))
                    m0 += w
                    m1 += w * k
                    m2 += w * k * k
            log_m += c * (math.log(m0) + t * kmax)
            mu = m1 / m0
            d1 += c * mu
            d2 += c * (m2 / m0 - mu * mu)
        best = min(best, log_m - t * total)
        grad = d1 - total
        if abs(grad) < 1e-9 or d2 <= 0:
            break
        t = max(t - grad / d2, t / 4)
        t = min(t, 200.0)
    return min(1.0, math.exp(best))


def chernoff_lower(pmfs: Sequence[tuple[tuple[float, ...], int]], total: float) -> float:
    """P(sum <= total), by the upper bound on the mirrored variables (max - X)."""
    mirrored = [(tuple(reversed(pmf)), c) for pmf, c in pmfs]
    top = sum(c * (len(pmf) - 1) for pmf, c in pmfs)
    return chernoff_upper(mirrored, top - total)


def convolved_upper(pmfs: Sequence[tuple[tuple[float, ...], int]], total: int) -> float:
    """P(sum >= total) exactly, by convolving the pmfs (slower than the Chernoff bound: the
    monitor asks only when that bound comes near a level)."""
    dist = [1.0]
    for pmf, count in pmfs:
        for _ in range(count):
            out = [0.0] * (len(dist) + len(pmf) - 1)
            for i, a in enumerate(dist):
                if a:
                    for j, b in enumerate(pmf):
                        out[i + j] += a * b
            dist = out
    return min(1.0, sum(dist[max(0, total) :]))


def sum_upper(pmfs: Sequence[tuple[tuple[float, ...], int]], total: int) -> float:
    """P(sum >= total): the Chernoff bound, made exact once it is small enough to matter."""
    bound = chernoff_upper(pmfs, total)
    return bound if bound > EXACT_BELOW else min(bound, convolved_upper(pmfs, total))


def sum_lower(pmfs: Sequence[tuple[tuple[float, ...], int]], total: int) -> float:
    """P(sum <= total), as sum_upper on the mirrored variables."""
    mirrored = [(tuple(reversed(pmf)), c) for pmf, c in pmfs]
    top = sum(c * (len(pmf) - 1) for pmf, c in pmfs)
    return sum_upper(mirrored, top - total)


EXACT_BELOW = 1e-4  # a Chernoff bound under this is replaced by the exact tail
