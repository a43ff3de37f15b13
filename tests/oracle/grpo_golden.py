"""Golden files for lib/train (tests/test_grpo.c), from real implementations:

- advantages: TRL's group normalisation (its own nanstd, epsilon 1e-4) for
  scale_rewards group / batch / none;
- loss and dL/dlogp: TRL's GRPOTrainer._compute_loss itself, called on a
  stand-in `self` that holds only the fields it reads and hands back fixed
  per-token log-probs as a leaf tensor, so autograd gives dL/dlogp; every
  loss type, on- and off-policy, with and without KL (bias correction on
  and off) and two-sided clipping (delta);
- AdamW: torch.optim.AdamW (single-tensor path) with clip_grad_norm_ over
  several steps, one parameter group without weight decay.

Writes tests/golden/grpo/*.txt: one array per line, "name count v0 v1 ...".
Run: .venv/bin/python tests/oracle/grpo_golden.py
"""
import os
import types

import torch
import trl
from trl.trainer.grpo_trainer import GRPOTrainer
from trl.trainer.utils import nanstd

OUT = os.path.join(os.path.dirname(__file__), "..", "golden", "grpo")


def put(f, name, t):
    vals = torch.as_tensor(t, dtype=torch.float64).flatten().tolist()
    f.write(f"{name} {len(vals)} " + " ".join(f"{v:.9g}" for v in vals) + "\n")


def advantages(rewards, group_size, scale):
    # the sum_then_normalize branch of _generate_and_score_completions
    mean = torch.nanmean(rewards.view(-1, group_size), dim=1).repeat_interleave(group_size)
    if scale == "batch":
        std = nanstd(rewards).expand_as(rewards)
    else:
        std = nanstd(rewards.view(-1, group_size), dim=1).repeat_interleave(group_size)
    adv = rewards - mean
    if scale != "none":
        adv = adv / (std + 1e-4)
    return adv


def write_advantages():
    rewards = torch.tensor([
        [1, 0, 0, 1, 0, 0, 0, 1],          # mixed
        [0, 0, 0, 0, 0, 0, 0, 0],          # no signal: advantage 0
        [1, 1, 1, 1, 1, 1, 1, 1],
        [0.5, 1, 0, 0.25, 1, 0, 0, 0.75],  # partial credit
        [1, 1, 1, 1, 1, 1, 1, 0],
    ], dtype=torch.float32)
    with open(os.path.join(OUT, "advantages.txt"), "w") as f:
        f.write(f"# trl {trl.__version__}, torch {torch.__version__}\n")
        put(f, "rewards", rewards)
        for scale in ("group", "batch", "none"):
            put(f, scale, advantages(rewards.flatten(), 8, scale))


class Stub:
    """The fields of GRPOTrainer that _compute_loss reads."""

    def __init__(self, logp, loss_type, beta, delta, bias_correction, max_completion_length):
        self.loss_type = loss_type
        self.beta = beta
        self.epsilon_low = 0.2
        self.epsilon_high = 0.28
        self.importance_sampling_level = "token"
        self.top_entropy_quantile = 1.0
        self.off_policy_mask_threshold = None
        self.use_vllm = False
        self.aux_loss_enabled = False
        self._entropy_bonus_enabled = False
        self.max_completion_length = max_completion_length
        self.current_gradient_accumulation_steps = 1
        self.model = types.SimpleNamespace(training=True)
        self.args = types.SimpleNamespace(delta=delta, use_bias_correction_kl=bias_correction,
                                          steps_per_generation=1)
        self.accelerator = types.SimpleNamespace(num_processes=1, gather=lambda x: x,
                                                 gather_for_metrics=lambda x: x,
                                                 reduce=lambda x, reduction="sum": x)
        self._metrics = {"train": _Metrics(), "eval": _Metrics()}
        self._logp = logp

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        return self._logp, torch.zeros_like(self._logp), None


class _Metrics(dict):
    def __missing__(self, key):
        self[key] = []
        return self[key]


def write_loss():
    g = torch.Generator().manual_seed(7)
    B, T, MAXLEN = 6, 12, 16
    logp = -3.0 * torch.rand(B, T, generator=g) - 0.01
    old = logp + 0.35 * torch.randn(B, T, generator=g)   # wide enough to clip both ways
    ref = logp + 0.5 * torch.randn(B, T, generator=g)
    lengths = [12, 7, 1, 0, 10, 4]                        # an empty completion too
    mask = torch.zeros(B, T, dtype=torch.int64)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.5, 1.0, 0.0])
    adv = advantages(rewards, 3, "group")
    cases = []
    for loss_type in ("grpo", "bnpo", "dr_grpo", "dapo"):
        for off_policy in (True, False):
            for beta in (0.0, 0.04):
                cases.append((loss_type, off_policy, beta, None, True))
    cases.append(("dapo", True, 0.04, None, False))
    cases.append(("grpo", True, 0.0, 1.25, True))
    cases.append(("bnpo", True, 0.1, 1.1, False))
    with open(os.path.join(OUT, "loss.txt"), "w") as f:
        f.write(f"# trl {trl.__version__}, torch {torch.__version__}; B {B} T {T} max_completion_length {MAXLEN}\n")
        put(f, "logp", logp)
        put(f, "old_logp", old)
        put(f, "ref_logp", ref)
        put(f, "mask", mask)
        put(f, "adv", adv)
        put(f, "cases", [len(cases)])
        for i, (loss_type, off_policy, beta, delta, bias_corr) in enumerate(cases):
            leaf = logp.clone().requires_grad_(True)
            stub = Stub(leaf, loss_type, beta, delta, bias_corr, MAXLEN)
            inputs = {
                "prompt_ids": torch.zeros(B, 1, dtype=torch.int64),
                "prompt_mask": torch.ones(B, 1, dtype=torch.int64),
                "completion_ids": torch.zeros(B, T, dtype=torch.int64),
                "completion_mask": mask,
                "advantages": adv,
                "num_items_in_batch": mask.sum(),
            }
            if off_policy:
                inputs["old_per_token_logps"] = old
            if beta:
                inputs["ref_per_token_logps"] = ref
            loss = GRPOTrainer._compute_loss(stub, None, inputs)
            loss.backward()
            m = stub._metrics["train"]
            put(f, f"case{i}", [["grpo", "bnpo", "dr_grpo", "dapo"].index(loss_type), int(off_policy),
                                beta, delta or 0.0, int(bias_corr)])
            put(f, f"loss{i}", [loss.item()])
            put(f, f"dlogp{i}", leaf.grad)
            put(f, f"stats{i}", [m["clip_ratio/low_mean"][0], m["clip_ratio/high_mean"][0],
                                 m["clip_ratio/region_mean"][0], m["kl"][0] if beta else 0.0])


def write_adamw():
    g = torch.Generator().manual_seed(11)
    sizes = [37, 5, 58]                 # the middle block takes no weight decay
    params = [torch.randn(n, generator=g).requires_grad_(True) for n in sizes]
    init = torch.cat([p.detach() for p in params])
    lr, betas, eps, wd, max_norm = 0.01, (0.9, 0.95), 1e-6, 0.1, 1.0
    opt = torch.optim.AdamW([{"params": [params[0], params[2]]},
                             {"params": [params[1]], "weight_decay": 0.0}],
                            lr=lr, betas=betas, eps=eps, weight_decay=wd, foreach=False)
    grads, norms = [], []
    for step in range(6):
        # a gradient large enough to be clipped on some steps, not others
        scale = 0.05 if step % 2 else 0.4
        gstep = [scale * torch.randn(n, generator=g) for n in sizes]
        for p, gr in zip(params, gstep):
            p.grad = gr.clone()
        grads.append(torch.cat(gstep))
        norms.append(torch.nn.utils.clip_grad_norm_(params, max_norm).item())
        opt.step()
    with open(os.path.join(OUT, "adamw.txt"), "w") as f:
        f.write(f"# torch {torch.__version__}: lr {lr} betas {betas} eps {eps} weight_decay {wd} max_norm {max_norm}\n")
        put(f, "hyper", [lr, betas[0], betas[1], eps, wd, max_norm, sizes[0], sizes[1]])
        put(f, "init", init)
        for s, gr in enumerate(grads):
            put(f, f"grad{s}", gr)
        put(f, "norms", norms)
        put(f, "final", torch.cat([p.detach() for p in params]))
        # a norm near 1e-6, where clip_grad_norm_'s 1e-6 in the divisor shows
        small = [1e-6 * torch.randn(n, generator=g).requires_grad_(True) for n in sizes]
        for t in small:
            t.grad = t.detach().clone()
        put(f, "small_grad", torch.cat([t.grad for t in small]))
        put(f, "small_norm", [torch.nn.utils.clip_grad_norm_(small, 2e-6).item()])
        put(f, "small_clipped", torch.cat([t.grad for t in small]))
        state = [opt.state[p] for p in params]
        put(f, "m", torch.cat([s["exp_avg"] for s in state]))
        put(f, "v", torch.cat([s["exp_avg_sq"] for s in state]))


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    write_advantages()
    write_loss()
    write_adamw()
