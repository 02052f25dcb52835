-- fct_task_lifecycles holds one row per task of stg_task_events (on every trace whose staging gives
-- it), with all its events and SCHEDULEs, and its durations are never negative
with

transitions as (
    select
        job_id,
        task_index,
        count(*) as n_events,
        count(*) filter (where event = 'schedule') as n_attempts,
    from stg_task_events
    group by job_id, task_index
),

lifecycles as (
    select
        job_id,
        task_index,
        count(*) as n_rows,
        sum(n_events) as n_events,
        sum(n_attempts) as n_attempts,
        bool_or(total_wait_s < 0 or total_run_s < 0) as negative,
    from fct_task_lifecycles
    group by job_id, task_index
),

final as (
    select
        job_id,
        task_index,
        lifecycles.n_rows,
        transitions.n_events as transition_events,
        lifecycles.n_events as lifecycle_events,
        transitions.n_attempts as transition_attempts,
        lifecycles.n_attempts as lifecycle_attempts,
        lifecycles.negative,
    from transitions
    full join lifecycles using (job_id, task_index)
    where lifecycles.n_rows is distinct from 1
        or transitions.n_events is distinct from lifecycles.n_events
        or transitions.n_attempts is distinct from lifecycles.n_attempts
        or lifecycles.negative
)

select * from final
