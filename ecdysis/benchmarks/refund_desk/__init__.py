"""The refund desk: a tiny benchmark (four orders, one policy rule) whose scripted agent has one harness-fixable
flaw, for fast training-loop tests and demos without τ² (see ``environment`` and ``scripted``)."""
