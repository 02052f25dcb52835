-- agg_alibaba_transition_counts counts every row of fct_alibaba_task_transitions once
with

counted as (select coalesce(sum(n), 0) as n from agg_alibaba_transition_counts),

rows as (select count(*) as n from fct_alibaba_task_transitions)

select
    counted.n as counted,
    rows.n as transitions,
from counted, rows
where counted.n <> rows.n
