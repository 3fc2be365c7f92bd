"""The arithmetic of a three-level ladder (each level twice the last) that both width checks share (the local one,
``covariance_local``, on per-sample means; the law one, ``law_distance``, on empirical CDFs): the Richardson weights
at the claimed rate q, the weights of the departure of the consecutive differences from the ratio 2^-q, the
extrapolation's remainder per unit of that departure, how far the limit lies from the extrapolation were the ladder
converging at the ratio its differences show (``rate_margin``), and how far the ladder could still move
(``reach``)."""

from __future__ import annotations

import numpy as np

RATIO_BAND = 0.5  # consecutive differences within 50% of the ratio 2^-q: the levels in the regime of the rate


def extrapolation_weights(widths: tuple[int, ...], rate: float) -> np.ndarray:
    """Weights over the ladder that give the limit of m(n) = L + B n^-q exactly (the claimed rate q): Richardson on the
    two widest widths, (m_K - r m_{K-1}) / (1 - r) with r = 2^-q, and 0 on the others (narrower widths, whose higher
    terms only the three widest are checked for, would carry weight otherwise)."""
    r = (widths[-1] / widths[-2]) ** -rate
    weights = np.zeros(len(widths))
    weights[-2:] = (-r / (1 - r), 1 / (1 - r))
    return weights


def departure_weights(rate: float) -> np.ndarray:
    """The weights of delta = -r m_1 + (1 + r) m_2 - m_3 (r = 2^-q): D_2 - r D_1, the departure of the consecutive
    differences D_k from the ratio of the claimed rate; C d.n^-2q on m(n) = L + B n^-q + C n^-2q."""
    r = 2.0**-rate
    return np.array([-r, 1 + r, -1.0])


def remainder_ratio(widths: tuple[int, ...], rate: float) -> float:
    """|c.n^-2q / d.n^-2q| (c the extrapolation's weights, d the departure's): on m(n) = L + B n^-q + C n^-2q the
    extrapolation's bias per unit of departure."""
    second = np.asarray(widths, dtype=np.float64) ** (-2 * rate)
    return abs(float((extrapolation_weights(widths, rate) @ second) / (departure_weights(rate) @ second)))


def shown_ratio(first, first_half, last, last_half) -> tuple[np.ndarray, ...]:
    """The differences as float arrays, whether D_1 is resolved (beyond its half-width) and the ratio the ladder
    shows, |D_2| / |D_1| where it is (else 0): (D_1, h_1, D_2, h_2, resolved, ratio)."""
    first, first_half, last, last_half = (
        np.atleast_1d(np.asarray(x, dtype=np.float64)) for x in (first, first_half, last, last_half)
    )
    resolved = np.abs(first) > first_half
    ratio = np.where(resolved, np.abs(last) / np.maximum(np.abs(first), np.finfo(np.float64).tiny), 0.0)
    return first, first_half, last, last_half, resolved, ratio


def reach(first, first_half, last, last_half, rate: float) -> np.ndarray:
    """How far a ladder whose last two consecutive differences are ``first`` (D_1) and ``last`` (D_2), with their
    half-widths, could still move, per component: the upper end of |D_2| times rho / (1 - rho), the sum of all later
    differences if each were rho times the last, with rho the larger of 2^-q/2 (half the claimed rate) and the ratio
    the ladder shows, |D_2| / |D_1| where D_1 is resolved (its point estimate: the ratio of interval ends is unbounded
    when D_1 is barely resolved); infinite (no bound) where that ratio is 1 or more, or D_1 and D_2 are resolved with
    opposite signs."""
    first, first_half, last, last_half, resolved, shown = shown_ratio(first, first_half, last, last_half)
    upper = np.abs(last) + last_half
    rho = np.maximum(2.0 ** (-rate / 2), shown)
    turning = resolved & (np.abs(last) > last_half) & (np.sign(first) != np.sign(last))
    with np.errstate(divide="ignore"):
        return np.where((rho >= 1) | turning, np.inf, upper * rho / np.maximum(1 - rho, np.finfo(np.float64).tiny))


def rate_margin(first, first_half, last, last_half, rate: float) -> np.ndarray:
    """How far from the extrapolation at the claimed rate the limit lies were the ladder converging at the ratio its
    consecutive differences show, per component: (|D_2| + h_2) |rho / (1 - rho) - r / (1 - r)| (the later differences
    summed at each ratio, r = 2^-q), rho = |D_2| / |D_1| where D_1 is resolved (beyond its half-width h_1; else 0:
    differences at the noise floor show no rate); infinite where rho >= 1. A claimed rate faster or slower than the
    ladder's by less than the regime test sees moves the extrapolation by about this (a law N(3.5 k^-0.7, 1) judged
    at rate 1; m(n) = n^-1.2 at rate 1, beyond the k^-2q remainder bound): a fail of the limit must exceed it."""
    first, first_half, last, last_half, resolved, shown = shown_ratio(first, first_half, last, last_half)
    r = 2.0**-rate
    rho = np.where(resolved, shown, r)
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = (np.abs(last) + last_half) * np.abs(rho / (1 - rho) - r / (1 - r))
    return np.where(rho >= 1, np.inf, margin)
