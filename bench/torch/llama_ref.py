#!/usr/bin/env python3
"""PyTorch reference for bench:gpu: meshtrain's Llama train step in eager PyTorch, for a side-by-side speed
figure on the same machine and a check that both frameworks compute the same loss.

The math mirrors packages/model/src/llama.ts: embedding -> N x (RMSNorm -> causal attention with RoPE
(rotate_half, cos/sin from float64) and grouped KV heads -> residual -> RMSNorm -> SwiGLU MLP -> residual)
-> RMSNorm -> LM head (the embedding when tied) -> mean next-token cross-entropy. The optimizer is
torch.optim.AdamW with weight decay on matrices only and gradient clipping by global norm, as meshtrain's
AdamW. Only torch and the standard library are used: it runs on a machine without network.

Usage (SPEC is a JSON object, a path to one, or '-' for stdin):
  llama_ref.py SPEC             time `warmup` + `steps` train steps, print one JSON line
  llama_ref.py --check SPEC     the loss of the spec's inputs at step 0 (no training), one JSON line
  llama_ref.py --validate SPEC  parse the spec (and the inputs' manifest), print parameter shapes; no torch
  llama_ref.py --probe          whether torch imports, its version and the device it would use

SPEC: {"config": {HF LlamaConfig fields}, "batch": B, "seq": T, "warmup": W, "steps": N,
       "phase": "graph" (forward + backward) | "step" (also clip + AdamW),
       "precision": "f32" | "bf16-autocast", "device": "auto" | "cuda" | "cpu",
       "optimizer": {"lr", "betas": [b1, b2], "eps", "weight_decay", "grad_clip"},
       "inputs": DIR (optional: manifest.json + raw little-endian f32 parameters and int32 tokens)}
Without inputs, parameters are N(0, 0.02) from torch's generator (norm gains 1) and tokens are
(i * 7919) mod vocab, as bench/lib/train-inputs.ts makes them.
"""

import json
import math
import os
import re
import resource
import sys
import time

CONFIG_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "max_position_embeddings",
    "rms_norm_eps",
    "rope_theta",
    "tie_word_embeddings",
)
INT_FIELDS = CONFIG_FIELDS[:7]
NORM_WEIGHT = re.compile(r"(layernorm|norm)\.weight$")
PHASES = ("graph", "step")
PRECISIONS = ("f32", "bf16-autocast")
DEVICES = ("auto", "cuda", "cpu")


class SpecError(ValueError):
    pass


def parameter_specs(c):
    """(name, shape) of every parameter, sorted by name as meshtrain's parameterSpecs."""
    d, inter = c["hidden_size"], c["intermediate_size"]
    kv = d // c["num_attention_heads"] * c["num_key_value_heads"]
    specs = [("model.embed_tokens.weight", [c["vocab_size"], d])]
    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d" % i
        specs += [
            (p + ".input_layernorm.weight", [d]),
            (p + ".self_attn.q_proj.weight", [d, d]),
            (p + ".self_attn.k_proj.weight", [kv, d]),
            (p + ".self_attn.v_proj.weight", [kv, d]),
            (p + ".self_attn.o_proj.weight", [d, d]),
            (p + ".post_attention_layernorm.weight", [d]),
            (p + ".mlp.gate_proj.weight", [inter, d]),
            (p + ".mlp.up_proj.weight", [inter, d]),
            (p + ".mlp.down_proj.weight", [d, inter]),
        ]
    specs.append(("model.norm.weight", [d]))
    if not c["tie_word_embeddings"]:
        specs.append(("lm_head.weight", [c["vocab_size"], d]))
    return sorted(specs, key=lambda s: s[0].encode("utf-8"))


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def positive_int(spec, key, default=None):
    v = spec.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (v == 0 and key != "warmup"):
        raise SpecError("%s: a positive integer, got %r" % (key, v))
    return v


def validate_spec(spec):
    """The spec with defaults filled in; raises SpecError naming the first thing wrong."""
    if not isinstance(spec, dict):
        raise SpecError("spec: a JSON object")
    c = spec.get("config")
    if not isinstance(c, dict):
        raise SpecError("config: a JSON object with %s" % ", ".join(CONFIG_FIELDS))
    missing = [k for k in CONFIG_FIELDS if k not in c]
    if missing:
        raise SpecError("config: missing %s" % ", ".join(missing))
    for k in INT_FIELDS:
        positive_int(c, k)
    if c["hidden_size"] % c["num_attention_heads"] or (c["hidden_size"] // c["num_attention_heads"]) % 2:
        raise SpecError("config: hidden_size / num_attention_heads must be an even integer")
    if c["num_attention_heads"] % c["num_key_value_heads"]:
        raise SpecError("config: num_key_value_heads must divide num_attention_heads")
    out = {
        "config": {k: c[k] for k in CONFIG_FIELDS},
        "batch": positive_int(spec, "batch"),
        "seq": positive_int(spec, "seq"),
        "warmup": positive_int(spec, "warmup", 2),
        "steps": positive_int(spec, "steps", 10),
        "phase": spec.get("phase", "step"),
        "precision": spec.get("precision", "f32"),
        "device": spec.get("device", "auto"),
        "optimizer": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1, "grad_clip": 1.0},
        "inputs": spec.get("inputs"),
    }
    if out["seq"] > c["max_position_embeddings"]:
        raise SpecError("seq: %d exceeds max_position_embeddings" % out["seq"])
    for key, allowed in (("phase", PHASES), ("precision", PRECISIONS), ("device", DEVICES)):
        if out[key] not in allowed:
            raise SpecError("%s: one of %s, got %r" % (key, ", ".join(allowed), out[key]))
    opt = spec.get("optimizer", {})
    for k in opt:
        if k not in out["optimizer"]:
            raise SpecError("optimizer: unknown key %r" % k)
    out["optimizer"].update(opt)
    if len(out["optimizer"]["betas"]) != 2:
        raise SpecError("optimizer.betas: two numbers")
    if out["inputs"] is not None and not os.path.isfile(os.path.join(out["inputs"], "manifest.json")):
        raise SpecError("inputs: %s has no manifest.json" % out["inputs"])
    return out


def read_inputs(spec):
    """{name: (shape, bytes)} of the parameters and (shape, bytes) of the int32 tokens, checked against the spec."""
    if sys.byteorder != "little":
        raise SpecError("inputs: raw little-endian files need a little-endian machine")
    d = spec["inputs"]
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    if m.get("format") != "meshtrain-f32le-v1":
        raise SpecError("inputs: unknown format %r" % m.get("format"))
    want = parameter_specs(spec["config"])
    have = [(p["name"], p["shape"]) for p in m["parameters"]]
    if have != [(n, s) for n, s in want]:
        raise SpecError("inputs: parameter names or shapes differ from the config's")
    token_shape = [spec["batch"], spec["seq"] + 1]
    if m["tokens"]["shape"] != token_shape or m["tokens"]["dtype"] != "int32":
        raise SpecError("inputs: tokens are %r, the spec wants int32 %r" % (m["tokens"]["shape"], token_shape))

    def load(entry, shape):
        with open(os.path.join(d, entry["file"]), "rb") as f:
            data = f.read()
        if len(data) != 4 * numel(shape):
            raise SpecError("inputs: %s has %d bytes, not %d" % (entry["file"], len(data), 4 * numel(shape)))
        return data

    params = {p["name"]: (p["shape"], load(p, p["shape"])) for p in m["parameters"]}
    return params, (token_shape, load(m["tokens"], token_shape))


def read_spec(arg):
    if arg == "-":
        return json.load(sys.stdin)
    if arg.lstrip().startswith("{"):
        return json.loads(arg)
    with open(arg) as f:
        return json.load(f)


# ---- the model (torch from here on) -------------------------------------------------------------------------


def pick_device(torch, want):
    if want == "cpu" or (want == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SpecError("device: cuda requested, but torch sees no CUDA device")
    return torch.device("cuda")


def device_name(torch, device):
    if device.type == "cuda":
        return "cuda: " + torch.cuda.get_device_name(device)
    return "cpu (%d threads)" % torch.get_num_threads()


def make_parameters(torch, spec, device):
    """Leaf tensors by HF name: the spec's inputs, or a fresh N(0, 0.02) init."""
    c = spec["config"]
    params = {}
    if spec["inputs"] is not None:
        raw, (token_shape, token_bytes) = read_inputs(spec)
        for name, (shape, data) in raw.items():
            t = torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(shape)
            params[name] = t.to(device).requires_grad_(True)
        tokens = torch.frombuffer(bytearray(token_bytes), dtype=torch.int32).reshape(token_shape)
    else:
        gen = torch.Generator().manual_seed(0)
        for name, shape in parameter_specs(c):
            t = torch.ones(shape) if len(shape) == 1 else torch.randn(shape, generator=gen) * 0.02
            params[name] = t.to(device).requires_grad_(True)
        n = spec["batch"] * (spec["seq"] + 1)
        ids = [(i * 7919) % c["vocab_size"] for i in range(n)]
        tokens = torch.tensor(ids, dtype=torch.int32).reshape(spec["batch"], spec["seq"] + 1)
    return params, tokens.to(device=device, dtype=torch.long)


def constants(torch, c, seq, device):
    """RoPE cos/sin [T, headDim] (float64, rounded once to float32) and the additive causal mask [T, T]."""
    head_dim = c["hidden_size"] // c["num_attention_heads"]
    half = head_dim // 2
    cos, sin = [], []
    for t in range(seq):
        row_cos, row_sin = [0.0] * head_dim, [0.0] * head_dim
        for i in range(half):
            angle = t * (1.0 / c["rope_theta"] ** ((2 * i) / head_dim))
            for j in (i, i + half):
                row_cos[j], row_sin[j] = math.cos(angle), math.sin(angle)
        cos.append(row_cos)
        sin.append(row_sin)
    cos = torch.tensor(cos, dtype=torch.float64).to(torch.float32).to(device)
    sin = torch.tensor(sin, dtype=torch.float64).to(torch.float32).to(device)
    mask = torch.triu(torch.full((seq, seq), -1e9, dtype=torch.float32), diagonal=1).to(device)
    return cos, sin, mask


def rms_norm(torch, x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rotate_half(torch, x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def loss_of(torch, F, c, params, tokens, consts):
    """Mean cross-entropy of tokens[:, 1:] given tokens[:, :-1]."""
    cos, sin, mask = consts
    batch, seq = tokens.shape[0], tokens.shape[1] - 1
    d, heads, kv_heads = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    head_dim, rep, eps = d // heads, heads // kv_heads, c["rms_norm_eps"]
    ids, targets = tokens[:, :-1], tokens[:, 1:]

    def linear(x, name):
        return x @ params[name].t()

    def split_heads(x, n):
        return x.reshape(batch, seq, n, head_dim).transpose(1, 2)

    def repeat_kv(x):
        if rep == 1:
            return x
        return x[:, :, None].expand(batch, kv_heads, rep, seq, head_dim).reshape(batch, heads, seq, head_dim)

    h = F.embedding(ids, params["model.embed_tokens.weight"]).reshape(batch * seq, d)
    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % i
        x = rms_norm(torch, h, params[p + "input_layernorm.weight"], eps)
        q = split_heads(linear(x, p + "self_attn.q_proj.weight"), heads)
        k = split_heads(linear(x, p + "self_attn.k_proj.weight"), kv_heads)
        v = split_heads(linear(x, p + "self_attn.v_proj.weight"), kv_heads)
        q = q * cos + rotate_half(torch, q) * sin
        k = k * cos + rotate_half(torch, k) * sin
        scores = (q @ repeat_kv(k).transpose(-2, -1)) * head_dim**-0.5 + mask
        ctx = torch.softmax(scores, dim=-1) @ repeat_kv(v)
        h = h + linear(ctx.transpose(1, 2).reshape(batch * seq, d), p + "self_attn.o_proj.weight")
        x = rms_norm(torch, h, params[p + "post_attention_layernorm.weight"], eps)
        gated = F.silu(linear(x, p + "mlp.gate_proj.weight")) * linear(x, p + "mlp.up_proj.weight")
        h = h + linear(gated, p + "mlp.down_proj.weight")
    h = rms_norm(torch, h, params["model.norm.weight"], eps)
    head = "model.embed_tokens.weight" if c["tie_word_embeddings"] else "lm_head.weight"
    logits = linear(h, head)
    return F.cross_entropy(logits.float(), targets.reshape(-1))


def setup(spec):
    import torch
    import torch.nn.functional as F

    # f32 means f32: no TF32 matmuls (PyTorch's default too; set in case the environment changed it).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = pick_device(torch, spec["device"])
    if spec["precision"] == "bf16-autocast" and device.type != "cuda":
        raise SpecError("precision: bf16-autocast runs on CUDA only")
    params, tokens = make_parameters(torch, spec, device)
    consts = constants(torch, spec["config"], spec["seq"], device)
    return torch, F, device, params, tokens, consts


def check(spec):
    """The loss at step 0 in float32: what meshtrain's first train step reports for the same inputs."""
    torch, F, device, params, tokens, consts = setup(dict(spec, precision="f32"))
    with torch.no_grad():
        loss = loss_of(torch, F, spec["config"], params, tokens, consts)
    return {"ok": True, "loss": float(loss.item()), "device": device_name(torch, device), "torch": torch.__version__}


def timed(spec):
    t0 = time.perf_counter()
    torch, F, device, params, tokens, consts = setup(spec)
    c, o = spec["config"], spec["optimizer"]
    names = sorted(params)
    decay = [params[n] for n in names if not NORM_WEIGHT.search(n)]
    no_decay = [params[n] for n in names if NORM_WEIGHT.search(n)]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": o["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=o["lr"],
        betas=tuple(o["betas"]),
        eps=o["eps"],
    )
    cuda = device.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def step():
        for t in params.values():
            t.grad = None
        if spec["precision"] == "bf16-autocast":
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = loss_of(torch, F, c, params, tokens, consts)
        else:
            loss = loss_of(torch, F, c, params, tokens, consts)
        loss.backward()
        if spec["phase"] == "step":
            torch.nn.utils.clip_grad_norm_(list(params.values()), o["grad_clip"])
            opt.step()
        return loss.detach()

    sync()
    setup_ms = (time.perf_counter() - t0) * 1000
    times, losses = [], []
    for _ in range(spec["warmup"] + spec["steps"]):
        t = time.perf_counter()
        losses.append(step())
        sync()
        times.append((time.perf_counter() - t) * 1000)
    losses = [float(x.item()) for x in losses]
    if not all(math.isfinite(x) for x in losses):
        raise RuntimeError("non-finite loss: %r" % losses)
    mib = 2.0**20
    return {
        "ok": True,
        "torch": torch.__version__,
        "device": device_name(torch, device),
        "phase": spec["phase"],
        "precision": spec["precision"],
        "step_ms": times[spec["warmup"] :],
        "setup_ms": setup_ms,
        "first_step_ms": times[0],
        "loss_first": losses[0],
        "loss_last": losses[-1],
        # ru_maxrss is in KiB on Linux.
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "peak_gpu_allocated_mb": torch.cuda.max_memory_allocated(device) / mib if cuda else None,
        "threads": torch.get_num_threads(),
    }


def probe():
    try:
        import torch
    except Exception as e:  # any import failure means: no usable torch here
        return {"ok": False, "error": "import torch: %s" % e}
    device = pick_device(torch, "auto")
    return {
        "ok": True,
        "torch": torch.__version__,
        "cuda": device.type == "cuda",
        "device": device_name(torch, device),
    }


def main(argv):
    modes = [a for a in argv if a in ("--check", "--validate", "--probe")]
    rest = [a for a in argv if a not in modes]
    if len(modes) > 1 or len(rest) > 1:
        raise SpecError("usage: llama_ref.py [--check|--validate] SPEC | --probe")
    mode = modes[0] if modes else "--time"
    if mode == "--probe":
        return probe()
    spec = validate_spec(read_spec(rest[0] if rest else "-"))
    if mode == "--validate":
        if spec["inputs"] is not None:
            read_inputs(spec)
        shapes = parameter_specs(spec["config"])
        return {
            "ok": True,
            "spec": spec,
            "parameters": [{"name": n, "shape": s} for n, s in shapes],
            "parameter_count": sum(numel(s) for _, s in shapes),
        }
    return check(spec) if mode == "--check" else timed(spec)


if __name__ == "__main__":
    try:
        result = main(sys.argv[1:])
    except Exception as e:  # one JSON line either way, so the caller can always parse the outcome
        print(json.dumps({"ok": False, "error": "%s: %s" % (type(e).__name__, e)}))
        print("llama_ref.py: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(1)
    print(json.dumps(result))
