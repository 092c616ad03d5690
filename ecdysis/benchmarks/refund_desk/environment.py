"""The refund desk: each task is one customer asking for the refund of one order. Policy: refund the item price,
never the shipping. The trusted side executes the tools, plays the customer, and grades from the refunds it made."""

from __future__ import annotations

import json
from typing import Any

from ecdysis.records import TerminationReason, TokenUsage

ORDERS: dict[str, dict[str, float]] = {
    "order-1": {"price": 40.0, "shipping": 5.0},
    "order-2": {"price": 25.0, "shipping": 0.0},
    "order-3": {"price": 60.0, "shipping": 8.0},
    "order-4": {"price": 15.0, "shipping": 3.0},
}
TASK_IDS = sorted(ORDERS)
DOMAIN = "refund_desk"
POLICY = "You are a refund agent. Refund the item price of the customer's order. Shipping is never refunded."
READ_TOOLS = frozenset({"get_order"})
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_order", "description": "Look up an order: its item price and shipping fee.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
    {"type": "function", "function": {
        "name": "refund", "description": "Refund an amount on an order.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
                       "required": ["order_id", "amount"]}}},
]


class RefundDeskEnvironment:
    """One episode of the refund desk (an :class:`ecdysis.protocols.EpisodeEnvironment`)."""

    policy = POLICY
    tools = TOOLS
    finished = False

    def __init__(self, task_id: str) -> None:
        if task_id not in ORDERS:
            raise ValueError(f"unknown refund-desk task {task_id!r}; known: {', '.join(TASK_IDS)}")
        self.task_id = task_id
        self.config: dict[str, Any] = {}
        self.refunds: list[tuple[str, float]] = []
        self._turns = 0

    def respond(self, text: str, *, deadline: float | None) -> tuple[str, bool]:
        self._turns += 1
        if self._turns == 1:
            return f"Please refund my order {self.task_id}.", False
        return "Thank you, goodbye.", True

    def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        return self._execute(name, arguments, read_only=False)

    def peek(self, name: str, arguments: Any) -> tuple[str, bool]:
        if name not in READ_TOOLS:
            return f"{name} is not a read-only tool", True
        return self._execute(name, arguments, read_only=True)

    def _execute(self, name: str, arguments: Any, *, read_only: bool) -> tuple[str, bool]:
        if not isinstance(arguments, dict):
            return "arguments must be an object", True
        if name not in {"get_order", "refund"}:
            return f"unknown tool {name}", True
        order = ORDERS.get(str(arguments.get("order_id")))
        if order is None:
            return f"no order {arguments.get('order_id')!r}", True
        if name == "get_order":
            return json.dumps({"order_id": arguments["order_id"], **order}), False
        try:
            amount = float(arguments.get("amount", 0))
        except (TypeError, ValueError):
            return f"invalid amount {arguments.get('amount')!r}", True
        self.refunds.append((str(arguments["order_id"]), amount))
        return f"refunded {amount:g} on {arguments['order_id']}", False

    def grade(self, reason: TerminationReason, messages: list[dict[str, Any]]) -> tuple[float, dict[str, float]]:
        """1.0 iff exactly the item price of the task's order was refunded, once."""
        reward = 1.0 if self.refunds == [(self.task_id, ORDERS[self.task_id]["price"])] else 0.0
        return reward, {"DB": reward}

    def usage(self) -> tuple[TokenUsage, int, int, float | None]:
        return TokenUsage(), 0, 0, None

    def close(self) -> None:
        """Nothing to release."""
