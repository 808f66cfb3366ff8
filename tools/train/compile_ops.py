"""Optional torch.compile of the elementwise-heavy helpers (quantisers, Sinkhorn) on torch 2.x:
each is compiled with dynamic shapes on first use and falls back to eager, permanently, if
compilation fails. The model code calls these through their modules, so patching the module
attributes is enough."""
import torch

from . import mhc, quant


def _version_ok():
    major = int(torch.__version__.split(".")[0])
    return major >= 2 and hasattr(torch, "compile")


def _guarded(fn, log):
    compiled = torch.compile(fn, dynamic=True)
    state = {"fn": compiled}

    def call(*args, **kwargs):
        try:
            return state["fn"](*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - any compiler failure: keep training in eager
            if state["fn"] is fn:
                raise
            log(f"torch.compile of {fn.__name__} failed ({type(e).__name__}: {e}); eager from now on")
            state["fn"] = fn
            return fn(*args, **kwargs)
    call.__name__ = fn.__name__
    return call


def enable(log=print):
    """Compiles the helpers; returns False (and changes nothing) on torch < 2."""
    if not _version_ok():
        log("compile=ops needs torch >= 2; running eager")
        return False
    for name in ("act_quant", "fp4_e8m0", "fp4_e4m3", "fp8_weight"):
        setattr(quant, name, _guarded(getattr(quant, name), log))
    quant.act_quant_ste = quant.ste(quant.act_quant)
    quant.fp4_e8m0_ste = quant.ste(quant.fp4_e8m0)
    quant.fp4_e4m3_ste = quant.ste(quant.fp4_e4m3)
    quant.fp8_weight_ste = quant.ste(quant.fp8_weight)
    quant.fp4_weight_ste = quant.ste(quant.fp4_weight)
    mhc.sinkhorn = _guarded(mhc.sinkhorn, log)
    return True
