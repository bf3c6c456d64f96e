"""Plan: the listing judged against what is reached, written as the plan a sweep executes. The logical plan as
datasets (``datasets``), the per-unit steps both backends run (``units``), and the what-if views over a dry mark
(``preview``, ``impact``)."""
