-- how often each (previous event, event) pair occurs (docs/methods.md §1.1), overall and per priority
-- class (the trace's is_production, judged on the later event: google-2011 priority >=
-- --production-priority, google-2019 the v3 production tier).
-- the row with prev_event_type null counts first events of tasks in the data.
-- every event counts, including those at time 0 and 2^63-1.
with

transitions as (
    select
        prev_event_type,
        event_type,
        prev_event,
        event,
        is_production,
        allowed_by_documented_graph,
    from fct_task_transitions
),

counts as (
    select
        prev_event_type,
        event_type,
        -- the trace's own code has one common name (stg_task_events); 'other' has none
        any_value(case when prev_event != 'other' then upper(prev_event) end) as prev_event_name,
        any_value(case when event != 'other' then upper(event) end) as event_name,
        any_value(allowed_by_documented_graph) as allowed_by_documented_graph,
        count(*) as n,
        count(*) filter (where is_production) as n_production,
        count(*) filter (where not is_production) as n_non_production,
    from transitions
    group by prev_event_type, event_type
),

final as (
    select
        prev_event_type,
        prev_event_name,
        event_type,
        event_name,
        n,
        n_production,
        n_non_production,
        allowed_by_documented_graph,
    from counts
    order by prev_event_type nulls first, event_type
)

select * from final
