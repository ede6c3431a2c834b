"""Benchmark: exact top-10 UEC probit scoring vs plain cosine, 1000 queries x 100k documents, D = 384.

Both scorers stream the corpus in chunks (matmul + running top-k). UEC is timed with both exact
strategies of :func:`ucse.uec.similarity.topk`: ``dense`` (sigma_s^2 for every pair, one extra fused
(Nq, 2D) x (2D, C) matmul) and ``bounded`` (each query's top 2k documents by mu_s get their exact
sigma_s^2, and s_hat <= mu_s certifies that no other document can enter the top k). Timings are best-of-N
after a warm-up on the same data in one process. Peak memory is reported as ru_maxrss growth per method
(process-wide, so a method only shows growth beyond the previous peak) plus the analytic size of the largest
per-chunk temporaries.

Usage: ``python bench/uec_scoring.py [--queries 1000] [--docs 100000] [--repeats 3] [--device cuda]``

``--ann-docs 1000000`` runs the large-corpus case instead: a FAISS IVF-flat first stage over the means
plus an exact probit re-rank of each query's candidates (``ucse/uec/ann.py``), on clustered synthetic
unit means (random centres + noise, so inverted lists have structure as real embeddings do), reporting
build and search time, memory, and recall@10 of the re-ranked list against exact streamed UEC top-10.
Needs ``faiss-cpu``.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import call_times  # noqa: E402

from ucse.core.gaussian import GaussianEmbeddings  # noqa: E402
from ucse.uec.similarity import cosine_topk, topk  # noqa: E402


def make_gaussians(
    n: int, dim: int, var_scale: float, gen: torch.Generator, member: str
) -> GaussianEmbeddings:
    """(n, dim) Gaussians with unit-norm means and per-dim variances in var_scale * [0.5, 1.5)."""
    mean = torch.randn(n, dim, generator=gen)
    mean = mean / mean.norm(dim=1, keepdim=True)
    var = var_scale * (0.5 + torch.rand(n, dim, generator=gen))
    return GaussianEmbeddings(mean, var, {"member": member})


def rss_mib() -> float:
    """Peak resident set size of this process so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` calls after one warm-up, in seconds."""
    return min(call_times(fn, repeats))


def make_clustered(
    n: int, dim: int, var_scale: float, gen: torch.Generator, centres: torch.Tensor
) -> GaussianEmbeddings:
    """(n, dim) Gaussians whose unit means scatter around random centres (chunked to bound memory)."""
    mean = torch.empty(n, dim)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        c = centres[torch.randint(len(centres), (m,), generator=gen)]
        mean[start : start + m] = torch.nn.functional.normalize(
            c + 0.5 * torch.randn(m, dim, generator=gen), dim=1
        )
    var = var_scale * (0.5 + torch.rand(n, dim, generator=gen))
    return GaussianEmbeddings(mean, var, {"member": "clustered"})


def ann_case(args: argparse.Namespace) -> None:
    """FAISS IVF first stage + exact probit re-rank vs exact UEC top-k on a large corpus."""
    from ucse.uec.ann import AnnProbitIndex

    gen = torch.Generator().manual_seed(0)
    centres = torch.randn(args.centres, args.dim, generator=gen)
    t0 = time.perf_counter()
    corpus = make_clustered(args.ann_docs, args.dim, args.var_scale, gen, centres)
    query = make_clustered(args.queries, args.dim, args.var_scale, gen, centres)
    rss0 = rss_mib()
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}; Nq={args.queries} "
        f"Nc={args.ann_docs} D={args.dim} k={args.k} centres={args.centres}; "
        f"data {time.perf_counter() - t0:.1f}s, RSS {rss0:.0f} MiB"
    )
    t0 = time.perf_counter()
    index = AnnProbitIndex(corpus, nlist=args.nlist, nprobe=args.nprobe)
    build = time.perf_counter() - t0
    rss1 = rss_mib()
    t0 = time.perf_counter()
    _, ann_idx = index.search(query, k=args.k, candidates=args.candidates)
    ann_t = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, exact_idx = topk(query, corpus, k=args.k, chunk=args.chunk, strategy="bounded")
    exact_t = time.perf_counter() - t0
    t0 = time.perf_counter()
    cosine_topk(query.mean, corpus.mean, k=args.k, chunk=args.chunk)
    cos_t = time.perf_counter() - t0
    hits = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(ann_idx, exact_idx))
    recall = hits / exact_idx.numel()
    index_mib = args.ann_docs * args.dim * 4 / 2**20
    print(f"IVF-flat nlist={index.nlist} nprobe={args.nprobe} candidates={args.candidates}")
    print(
        f"build (train + add) {build:.1f} s; index vectors {index_mib:.0f} MiB; "
        f"peak RSS growth {rss1 - rss0:.0f} MiB"
    )
    print(
        f"ANN + probit re-rank: {ann_t:.2f} s for {args.queries} queries "
        f"({1e3 * ann_t / args.queries:.2f} ms/query)"
    )
    print(
        f"exact UEC top-{args.k} (bounded, streamed): {exact_t:.2f} s; "
        f"exact cosine top-{args.k}: {cos_t:.2f} s"
    )
    print(f"speed-up of ANN + re-rank over exact UEC: {exact_t / ann_t:.1f}x")
    print(f"recall@{args.k} of ANN + re-rank against exact UEC top-{args.k}: {recall:.4f}")
    print(f"peak RSS {rss_mib():.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=16384)
    parser.add_argument(
        "--var-scale", type=float, default=1e-4, help="per-dim variance scale (tr ~ D x this)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--ann-docs", type=int, default=0, help="run the FAISS + re-rank case on this many docs"
    )
    parser.add_argument("--centres", type=int, default=2000, help="clusters of the synthetic ANN corpus")
    parser.add_argument("--nlist", type=int, default=None, help="IVF lists (default ~4 sqrt(N))")
    parser.add_argument("--nprobe", type=int, default=32)
    parser.add_argument("--candidates", type=int, default=100, help="first-stage docs re-ranked per query")
    parser.add_argument("--device", default="cpu", help="where the exact case scores (cpu or cuda)")
    args = parser.parse_args()
    if args.ann_docs:
        ann_case(args)
        return

    gen = torch.Generator().manual_seed(0)
    query = make_gaussians(args.queries, args.dim, args.var_scale, gen, "queries")
    corpus = make_gaussians(args.docs, args.dim, args.var_scale, gen, "corpus")
    if args.device != "cpu":
        query, corpus = (
            GaussianEmbeddings(g.mean.to(args.device), g.var.to(args.device), g.meta) for g in (query, corpus)
        )
    k, chunk = args.k, args.chunk
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, device {where}; Nq={args.queries} "
        f"Nc={args.docs} D={args.dim} k={k} chunk={chunk} var~{args.var_scale}*U[0.5,1.5)"
    )

    runs = {
        "cosine": lambda: cosine_topk(query.mean, corpus.mean, k=k, chunk=chunk),
        "uec_bounded": lambda: topk(query, corpus, k=k, chunk=chunk, strategy="bounded"),
        "uec_dense": lambda: topk(query, corpus, k=k, chunk=chunk, strategy="dense"),
    }
    base = rss_mib()
    times, growth, results = {}, {}, {}
    for name, fn in runs.items():
        before = rss_mib()
        times[name] = best_time(fn, args.repeats)
        growth[name] = rss_mib() - before
        results[name] = fn()
    pair = args.queries * chunk * 4 / 2**20
    temps = {
        "cosine": f"(Nq, C) fp32 scores = {pair:.0f} MiB",
        "uec_bounded": f"(Nq, C) fp32 mu_s = {pair:.0f} MiB + 2 x (Nq, 2k, D) gathers "
        f"= {2 * args.queries * 2 * k * args.dim * 4 / 2**20:.0f} MiB",
        "uec_dense": f"3 x (Nq, C) fp32 (mu_s, sigma_s^2, score) = {3 * pair:.0f} MiB + (C, 2D) "
        f"= {chunk * 2 * args.dim * 4 / 2**20:.0f} MiB",
    }
    print(f"baseline peak RSS after data creation: {base:.0f} MiB")
    for name in runs:
        ratio = times[name] / times["cosine"]
        print(
            f"{name:12s} best {times[name] * 1e3:8.1f} ms  ratio vs cosine {ratio:5.2f}  "
            f"peak-RSS growth {growth[name]:6.1f} MiB  largest temporaries {temps[name]}"
        )
    for name in ("uec_bounded", "uec_dense"):
        verdict = "PASS" if times[name] / times["cosine"] <= 2.5 else "FAIL"
        print(f"target ratio <= 2.5 for {name}: {verdict}")

    same = torch.equal(results["uec_bounded"][1], results["uec_dense"][1])
    print(f"bounded and dense UEC top-{k} identical: {same}")
    zero_q = GaussianEmbeddings(query.mean, torch.zeros_like(query.var))
    zero_c = GaussianEmbeddings(corpus.mean, torch.zeros_like(corpus.var))
    _, idx_uec = topk(zero_q, zero_c, k=k, chunk=chunk)
    overlap = (idx_uec == results["cosine"][1]).float().mean().item()
    print(
        f"zero variance: UEC top-{k} == cosine top-{k}: "
        f"{torch.equal(idx_uec, results['cosine'][1])} (agree {overlap:.4f})"
    )
    changed = (results["uec_bounded"][1] != results["cosine"][1]).any(1).float().mean().item()
    print(f"with variances: fraction of queries whose top-{k} differs from cosine: {changed:.3f}")


if __name__ == "__main__":
    main()
