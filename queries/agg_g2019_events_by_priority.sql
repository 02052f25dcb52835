-- google-2019: instance events and distinct instances per (priority, event type), the parallel of
-- google-2011's agg_events_by_priority (same columns). v3 types: 0 SUBMIT, 1 QUEUE, 2 ENABLE,
-- 3 SCHEDULE, 4 EVICT, 5 FAIL, 6 FINISH, 7 KILL, 8 LOST, 9 UPDATE_PENDING, 10 UPDATE_RUNNING.
-- every instance_events row counts, whatever its time: n_before_window are those at time 0,
-- n_after_window those at 2^63-1. an instance (collection_id, instance_index) counts once per
-- pair it has events in. n_missing_info: synthesised records (v3 missing_type 1-5; 0 or empty =
-- MISSING_TYPE_NONE, nothing missing).
with

instance_events as (
    select
        collection_id,
        instance_index,
        time,
        type as event_type,
        priority,
        missing_type,
    from instance_events
),

per_pair as (
    select
        priority,
        event_type,
        count(*) as n_events,
        count(distinct (collection_id, instance_index)) as n_tasks,
        count(*) filter (where time = 0) as n_before_window,
        count(*) filter (where time = $time_after_window_us) as n_after_window,
        count(*) filter (where missing_type > 0) as n_missing_info,
    from instance_events
    group by priority, event_type
),

final as (
    select
        priority,
        event_type,
        priority >= $g2019_production_priority as is_production,
        n_events,
        n_tasks,
        n_before_window,
        n_after_window,
        n_missing_info,
    from per_pair
    order by priority, event_type
)

select * from final
