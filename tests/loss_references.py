"""Eq. 3 (LCL), SupCon and SimCSE written as plain loops over Python floats: the losses' references."""

import math


def _unit(z):
    return [[x / math.sqrt(sum(v * v for v in row)) for x in row] for row in z.tolist()]


def _dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def lcl_reference(z, labels, tau):
    """Eq. 3 written as loops: denominator over all j including i; anchors without positives skipped."""
    zs, ys = _unit(z), labels.tolist()
    n, terms = len(ys), []
    for i in range(n):
        num = sum(math.exp(_dot(zs[i], zs[k]) / tau) for k in range(n) if k != i and ys[k] == ys[i])
        if num == 0:
            continue
        den = sum(math.exp(_dot(zs[i], zs[j]) / tau) for j in range(n))
        terms.append(-math.log(num / den))
    return sum(terms) / len(terms)


def supcon_reference(z, labels, tau):
    zs, ys = _unit(z), labels.tolist()
    n, terms = len(ys), []
    for i in range(n):
        pos = [p for p in range(n) if p != i and ys[p] == ys[i]]
        if not pos:
            continue
        den = sum(math.exp(_dot(zs[i], zs[a]) / tau) for a in range(n) if a != i)
        terms.append(-sum(math.log(math.exp(_dot(zs[i], zs[p]) / tau) / den) for p in pos) / len(pos))
    return sum(terms) / len(terms)


def simcse_reference(z1, z2, tau):
    a, b = _unit(z1), _unit(z2)
    n, total = len(a), 0.0
    for i in range(n):
        den = sum(math.exp(_dot(a[i], b[j]) / tau) for j in range(n))
        total += -math.log(math.exp(_dot(a[i], b[i]) / tau) / den)
    return total / n
