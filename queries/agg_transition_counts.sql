-- how often each (previous event, event) pair occurs (docs/methods.md §1.1), overall and per priority
-- class (production = priority >= $production_priority, judged on the later event's priority).
-- the row with prev_event_type null counts first events of tasks in the data.
-- every event counts, including those at time 0 and 2^63-1.
with

transitions as (
    select
        prev_event_type,
        event_type,
        is_production,
        allowed_by_documented_graph,
    from fct_task_transitions
),

event_names as (
    select * from (
        values
            (0, 'SUBMIT'),
            (1, 'SCHEDULE'),
            (2, 'EVICT'),
            (3, 'FAIL'),
            (4, 'FINISH'),
            (5, 'KILL'),
            (6, 'LOST'),
            (7, 'UPDATE_PENDING'),
            (8, 'UPDATE_RUNNING')
    ) as t (event_type, event_name)
),

counts as (
    select
        prev_event_type,
        event_type,
        any_value(allowed_by_documented_graph) as allowed_by_documented_graph,
        count(*) as n,
        count(*) filter (where is_production) as n_production,
        count(*) filter (where not is_production) as n_non_production,
    from transitions
    group by prev_event_type, event_type
),

final as (
    select
        counts.prev_event_type,
        prev_names.event_name as prev_event_name,
        counts.event_type,
        names.event_name as event_name,
        counts.n,
        counts.n_production,
        counts.n_non_production,
        counts.allowed_by_documented_graph,
    from counts
    left join event_names as prev_names on counts.prev_event_type = prev_names.event_type
    left join event_names as names on counts.event_type = names.event_type
    order by counts.prev_event_type nulls first, counts.event_type
)

select * from final
