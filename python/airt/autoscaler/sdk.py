"""Ray's ``ray.autoscaler.sdk``: ask the autoscaler for capacity ahead of the work."""

import math
from typing import Dict, List, Optional


def request_resources(
    num_cpus: Optional[int] = None,
    bundles: Optional[List[Dict[str, float]]] = None,
    bundle_label_selectors: Optional[List[Dict[str, str]]] = None,
) -> None:
    """Asks the autoscaler to keep the cluster able to hold this much at once.

    As Ray's: ``num_cpus`` asks for that many ``{"CPU": 1}`` bundles, ``bundles`` for each of
    its shapes, and ``bundle_label_selectors[i]`` for the labels the node holding
    ``bundles[i]`` must carry, in Ray's label_selector forms: ``"v"``, ``"!v"``,
    ``"in(a,b)"``, ``"!in(a,b)"`` (``!`` forms also match a node without the label). The request
    is bin-packed onto the nodes' totals (busy or not) and stands until the next call replaces
    it; ``request_resources()`` with nothing clears it. The head keeps it in its metadata store,
    so a restarted head (with Redis) still has it.
    """
    from airt import _airt

    if not _airt.is_initialized():
        raise RuntimeError("request_resources needs airt.init() first")
    shapes: List[Dict[str, float]] = []
    if num_cpus is not None:
        if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) or num_cpus < 0:
            raise ValueError(f"num_cpus must be a number >= 0, got {num_cpus!r}")
        shapes.extend({"CPU": 1.0} for _ in range(int(math.ceil(num_cpus))))
    given = list(bundles or [])
    for i, bundle in enumerate(given):
        if not isinstance(bundle, dict) or not bundle:
            raise ValueError(f"bundles[{i}] must be a non-empty dict of resources, got {bundle!r}")
        clean = {}
        for name, amount in bundle.items():
            if (not isinstance(name, str) or isinstance(amount, bool)
                    or not isinstance(amount, (int, float))
                    or not math.isfinite(amount) or amount < 0):
                raise ValueError(f"bundles[{i}][{name!r}] must be a number >= 0, got {amount!r}")
            clean[name] = float(amount)
        shapes.append(clean)
    selectors = list(bundle_label_selectors or [])
    if len(selectors) > len(given):
        raise ValueError(
            f"bundle_label_selectors has {len(selectors)} entries for {len(given)} bundles")
    for i, selector in enumerate(selectors):
        if not isinstance(selector, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in selector.items()):
            raise ValueError(f"bundle_label_selectors[{i}] must be a dict of str to str")
    # Selectors apply to `bundles`, which come after the num_cpus bundles.
    offset = len(shapes) - len(given)
    full = [{} for _ in range(offset)] + [dict(s) for s in selectors]
    _airt.request_resources(shapes, full)
