-- agg_events_by_priority counts every stg_task_events row once (every trace whose staging gives
-- it), and its sub-counts fit in its counts
with

totals as (
    select
        (select count(*) from stg_task_events) as n_rows,
        (select sum(n_events) from agg_events_by_priority) as n_counted,
),

final as (
    select
        null as priority,
        null as event_type,
        n_rows as n_events,
        n_counted as n_tasks,
    from totals
    where n_rows <> coalesce(n_counted, 0)
    union all
    select
        priority,
        event_type,
        n_events,
        n_tasks,
    from agg_events_by_priority
    where n_tasks < 1
        or n_tasks > n_events
        or n_before_window + n_after_window > n_events
        or n_missing_info > n_events
)

select * from final
