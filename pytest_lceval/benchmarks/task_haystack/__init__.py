"""Task Haystack (Lifelong ICL): does a model still use a task's demonstrations when they sit
somewhere in a long stream of other tasks' demonstrations?

Modules: ``data`` (tasks in the Lifelong-ICL format, task sets), ``releases`` (the public data,
downloaded by ``--lceval-fetch llicl`` or ``--haystack-fetch``), ``offline_pack`` (the self-made
offline tasks), ``prompts`` (task blocks, streams and the controlled settings), ``ranking``
(option first tokens, accuracies), ``verdict`` (the paired t-test), ``config`` (options),
``runner`` (one test), ``task_haystack_plugin`` (hooks), ``report`` and ``figures`` (session-end
outputs).
"""
