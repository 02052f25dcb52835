-- task events and distinct tasks per (priority, event type): the counts a Spark analysis of the
-- trace publishes, for every trace whose staging gives stg_task_events (event_type is the
-- trace's own code). every event counts, whatever its time: n_before_window are those at time 0
-- (before the window), n_after_window those at 2^63-1 (after it). a task (job_id, task_index)
-- counts once per pair it has events in, so it may count under several priorities when an
-- UPDATE changed its priority. n_missing_info: records the trace synthesised. is_production is
-- the staging view's, which depends on the priority alone.
with

events as (
    select
        job_id,
        task_index,
        time,
        event_type,
        priority,
        is_production,
        missing_info,
    from stg_task_events
),

per_pair as (
    select
        priority,
        event_type,
        any_value(is_production) as is_production,
        count(*) as n_events,
        count(distinct (job_id, task_index)) as n_tasks,
        count(*) filter (where time = 0) as n_before_window,
        count(*) filter (where time = $time_after_window_us) as n_after_window,
        count(missing_info) as n_missing_info,
    from events
    group by priority, event_type
),

final as (
    select
        priority,
        event_type,
        is_production,
        n_events,
        n_tasks,
        n_before_window,
        n_after_window,
        n_missing_info,
    from per_pair
    order by priority, event_type
)

select * from final
