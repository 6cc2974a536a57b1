"""The float32 (and bf16) matrix-product rate at the shapes a training step of luong's fused kernels
multiplies, to hold the whole step's rate against (bench/train_vs_python.sh prints that one).

The fused kernels run two kinds of product (models/fused_recurrence.cpp):
  per step     each intra-op thread runs its own block of batch rows through every time step, so
               these are [batch / threads, K] x [K, N] products on one core each: timed on 1 thread
               and multiplied by the thread count (the cores share nothing but memory bandwidth);
               a bidirectional encoder layer's two directions share the threads, so its blocks are
               twice as large ([batch, K] at 2 threads: each thread runs one direction);
  whole        the input projections over all steps, every weight gradient (one product over all
               steps) and the output projection: [rows of the batch, K] x [K, N] on all threads.
Each product's forward and its two backward products (input gradient: the same kind; weight
gradient: a whole-batch product) are weighted by the operations a real token costs (the count of
bench/seq2seq_reference.py's model_flops), and the rates combine as total operations over total time:
the rate the step would reach if it did nothing but multiply. GRU cells (3 gates), as the reference.
--split columns times the per-step products the other way a step could share them out, each thread
taking every row and N / threads of the columns ([batch, K] x [K, N / threads] on one core each): the
kernels do not do this today; it measures what they would gain.

    python bench/matmul_rate.py --hidden 512 --embed 512 --layers 2 --bidirectional --vocab 3300 \
        --batch 32 --source-length 9 --target-length 9 --threads 2
"""

import argparse
import time

import torch


def rate(m, k, n, dtype, threads, library="mkl", seconds=0.3):
    """GFLOP/s of [m, k] x [k, n]: LibTorch's mm (MKL for float32, oneDNN for bf16), or oneDNN's
    float32 kernels (library "onednn": its inner product on oneDNN tensors, as luong's float32
    products on AMD processors with AVX-512), or the faster of the two ("best")."""
    if dtype != torch.float32:
        library = "mkl"  # LibTorch's mm runs bf16 in oneDNN already
    if library == "best":
        return max(rate(m, k, n, dtype, threads, "mkl", seconds), rate(m, k, n, dtype, threads, "onednn", seconds))
    torch.set_num_threads(threads)
    a = torch.randn(m, k).to(dtype)
    weight = torch.randn(n, k).to(dtype)  # stored [out, in], as nn.Linear's
    if library == "onednn" and dtype == torch.float32:
        a, weight = a.to_mkldnn(), weight.to_mkldnn()
        product = lambda: torch._C._nn.mkldnn_linear(a, weight)
    else:
        b = weight.t()
        product = lambda: a @ b
    for _ in range(5):
        product()
    reps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        product()
        reps += 1
    return 2.0 * m * k * n * reps / (time.perf_counter() - start) / 1e9


def products(args):
    """(name, per-token operations of the forward product, kind, m, k, n, tokens) for each product."""
    h, e, v = args.hidden, args.embed, args.vocab
    g = 3 * h
    d = 2 if args.bidirectional else 1
    rows = -(-args.batch // args.threads) if args.split == "rows" else args.batch
    # A bidirectional layer's two directions share the threads: each gets half, in blocks of rows.
    encoder_rows = -(-args.batch // max(1, args.threads // d)) if args.split == "rows" else args.batch
    src, tgt = args.batch * args.source_length, args.batch * args.target_length
    out = []
    for layer in range(args.layers):
        inputs = h if layer == 0 else d * h
        out.append((f"encoder {layer} input", d, "whole", src, inputs, g, "source"))
        out.append((f"encoder {layer} recurrent", d, "step", encoder_rows, h, g, "source"))
    if args.bidirectional:
        out.append(("bridge", 1, "whole", src, 2 * h, h, "source"))
    out.append(("decoder 0 embedding", 1, "whole", tgt, e, g, "target"))
    out.append(("decoder 0 input feeding", 1, "step", rows, h, g, "target"))
    out.append(("decoder 0 recurrent", 1, "step", rows, h, g, "target"))
    for layer in range(1, args.layers):
        out.append((f"decoder {layer} input", 1, "step", rows, h, g, "target"))
        out.append((f"decoder {layer} recurrent", 1, "step", rows, h, g, "target"))
    out.append(("attentional (Wc)", 1, "step", rows, 2 * h, h, "target"))
    out.append(("output projection", 1, "whole", tgt, h, v, "target"))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--embed", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--bidirectional", action="store_true")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--source-length", type=float, default=9.0, help="mean real source tokens per sentence")
    ap.add_argument("--target-length", type=float, default=9.0, help="mean real target tokens per sentence")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--split", choices=["rows", "columns"], default="rows",
                    help="how a step's products are shared among the threads (the kernels: rows)")
    ap.add_argument("--library", choices=["mkl", "onednn", "best"], default="mkl",
                    help="float32 products: LibTorch's mm (MKL), oneDNN's kernels, or the faster per shape")
    args = ap.parse_args()
    per_sentence = {"source": args.source_length, "target": args.target_length}
    for dtype in (torch.float32, torch.bfloat16):
        total_ops = total_time = 0.0
        print(f"\n{dtype}: product, kind, forward shape, GFLOP/s (forward / input gradient / weight gradient)")
        for name, copies, kind, m, k, n, side in products(args):
            threads = 1 if kind == "step" else args.threads
            scale = args.threads if kind == "step" else 1
            m_int = max(1, int(round(m)))
            rows_whole = max(1, int(round(args.batch * per_sentence[side])))
            # A thread's share of a per-step product's columns: the output's (forward), the input's
            # (input gradient).
            n_share, k_share = n, k
            if kind == "step" and args.split == "columns":
                n_share, k_share = -(-n // args.threads), -(-k // args.threads)
            forward = rate(m_int, k, n_share, dtype, threads, args.library) * scale
            input_grad = rate(m_int, n, k_share, dtype, threads, args.library) * scale
            weight_grad = rate(n, rows_whole, k, dtype, args.threads, args.library)
            ops = 2.0 * k * n * copies * per_sentence[side]  # per sentence, each of the three products
            total_ops += 3 * ops
            total_time += ops / forward + ops / input_grad + ops / weight_grad
            print(f"  {name:24s} {kind:5s} [{m_int}, {k}] x [{k}, {n_share}]  {forward:7.1f} / {input_grad:7.1f} / {weight_grad:7.1f}")
        print(f"{dtype} products at these shapes, weighted by their share of the step: "
              f"{total_ops / total_time:.1f} GFLOP/s on {args.threads} threads (per-step products split by {args.split}, float32 by {args.library})")


if __name__ == "__main__":
    main()
