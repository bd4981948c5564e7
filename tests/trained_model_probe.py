"""Engine side of tests/test_trained_model.py: run one vLLM engine on token-id prompts, one request at a time, and
record every draft the MTP proposer makes.

    python tests/trained_model_probe.py SPEC.json OUT.json     (SPEC: model, k, prompts [[ids]], max_tokens)

`DraftRecorder` is a vLLM worker extension (`worker_extension_cls`): it wraps the drafter's `propose` in the worker
process, where the draft runs, and hands the recorded `[batch, k]` draft token ids back through `collective_rpc`.
"""
import json, os, sys, time


class DraftRecorder:
    def probe_install(self) -> bool:
        drafter = getattr(self.model_runner, "drafter", None)
        if drafter is None: return False
        self._probe_drafts = []
        inner = drafter.propose
        def propose(*a, **kw):
            out = inner(*a, **kw)
            self._probe_drafts.append(out.tolist())
            return out
        drafter.propose = propose
        return True

    def probe_take(self) -> list:
        d, self._probe_drafts = self._probe_drafts, []
        return d

    def probe_draft_class(self) -> str:
        m = self.model_runner.drafter.model
        return f"{type(m).__module__}.{type(m).__qualname__}"


def main(spec_path, out_path):
    spec = json.load(open(spec_path))
    from vllm import LLM, SamplingParams
    k = spec["k"]
    llm = LLM(model=spec["model"], dtype="bfloat16", max_model_len=256, enforce_eager=True, max_num_seqs=4,
              max_num_batched_tokens=256, disable_log_stats=False, seed=0, enable_prefix_caching=False,
              speculative_config={"method": "mtp", "num_speculative_tokens": k} if k else None,
              worker_extension_cls="trained_model_probe.DraftRecorder")
    res = {"tokens": [], "drafts": [], "draft_class": None}
    if k:
        assert llm.collective_rpc("probe_install")[0]
        res["draft_class"] = llm.collective_rpc("probe_draft_class")[0]
    sp = SamplingParams(temperature=0, max_tokens=spec["max_tokens"])
    t0 = time.perf_counter()
    for ids in spec["prompts"]:   # one request at a time: each recorded draft row belongs to this prompt
        o = llm.generate([{"prompt_token_ids": ids}], sp, use_tqdm=False)[0]
        res["tokens"].append(list(o.outputs[0].token_ids))
        if k: res["drafts"].append([row[0] for row in llm.collective_rpc("probe_take")[0]])
    res["wall_s"] = time.perf_counter() - t0
    res["metrics"] = {m.name: (getattr(m, "values", None) or getattr(m, "value", 0))
                      for m in llm.get_metrics() if m.name.startswith("vllm:spec_decode")}
    json.dump(res, open(out_path, "w"))


if __name__ == "__main__":
    main(*sys.argv[1:3])
