-- alibaba-2018: how often each (previous state, state) pair occurs in fct_alibaba_task_transitions,
-- per level (task, instance); the row with prev_state null counts the rows' first states (so its
-- Waiting row is the number of tasks still waiting at the end of the trace).
with

final as (
    select
        level,
        prev_state,
        state,
        count(*) as n,
        count(*) filter (where not times_consistent) as n_times_inconsistent,
        any_value(allowed_by_documented_graph) as allowed_by_documented_graph,
    from fct_alibaba_task_transitions
    group by level, prev_state, state
    order by level, prev_state nulls first, state
)

select * from final
