-- the pair counts add up to the number of events, and the class counts to the total
with

totals as (
    select
        (select count(*) from fct_task_transitions) as n_events,
        (select sum(n) from agg_transition_counts) as n_counted,
),

classes as (
    select
        prev_event_type,
        event_type,
        n,
        n_production + n_non_production as n_by_class,
    from agg_transition_counts
    where n <> n_production + n_non_production
),

final as (
    select
        null as prev_event_type,
        null as event_type,
        n_events as n,
        n_counted as n_by_class,
    from totals
    where n_events <> coalesce(n_counted, 0)
    union all
    select
        *,
    from classes
)

select * from final
