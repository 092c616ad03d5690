"""A run's event log: the driver publishes :class:`~ecdysis.records.RunEvent` records to the store's ``events``
dataset (:class:`EventLog`, batched); watchers read them back (:class:`EventFollower`, :func:`liveness`).

The store is the only channel: ``ecdysis train`` renders the events of its own run exactly as
``ecdysis runs watch`` renders them from another terminal or machine (local folder or S3 alike).
"""

from ecdysis.events.follow import EventFollower, Liveness, liveness
from ecdysis.events.log import EventLog

__all__ = ["EventFollower", "EventLog", "Liveness", "liveness"]
