"""Ray's ``ray.autoscaler``: the autoscaler's SDK (:mod:`airt.autoscaler.sdk`).

The autoscaler itself is ``airt-autoscaler``, started by ``airt up cluster.yaml``
(docs/autoscaler.md).
"""

from airt.autoscaler import sdk

__all__ = ["sdk"]
