"""Every task, registered once: one :class:`~albert_edge.tasks.types.Task` per kind.

Why a registry and not ``if kind is ...`` chains: detecting, reading, encoding, scoring
and describing a task each dispatch through :func:`~albert_edge.tasks.types.task_for`,
so a task is added in one place (its module's ``Task`` and one line here). The order is
the order :func:`albert_edge.tasks.detect_task` asks the tasks whether a file is theirs:
a GLUE header before a SWAG header before CoNLL lines; a SQuAD object before a RACE one.
The package imports this module, so the registry is full before any task is used.
"""

from __future__ import annotations

from albert_edge.tasks.choice import ChoiceTask, MaskedLMTask
from albert_edge.tasks.classification import ClassificationTask
from albert_edge.tasks.squad import QATask
from albert_edge.tasks.tokens import TokenTask
from albert_edge.tasks.types import TASKS, Task, TaskKind

_ORDER: tuple[Task, ...] = (
    ClassificationTask(),
    QATask(),
    ChoiceTask(),
    TokenTask(),
    MaskedLMTask(),
)
TASKS.update({task.kind: task for task in _ORDER})
assert set(TASKS) == set(TaskKind), "every TaskKind has one Task"
