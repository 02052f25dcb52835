-- the numbers the transitions page states (docs/methods.md §1.2, Zhu et al. Fig. 1), one row, over
-- agg_transition_counts' pairs that have a previous event (a task's first event in the data is no
-- transition): transitions_total, transitions_undocumented (pairs the documented graph does not
-- allow; an unknown verdict counts as not allowed), undocumented_share (0 without transitions),
-- undocumented_types (distinct undocumented pairs), evict_after_submit (SUBMIT -> EVICT, by the
-- events' common names, so any trace's codes), submit_after_submit (SUBMIT -> SUBMIT). headline_key names the number the index shows beside the
-- page's link and condition what it holds under.
with

moves as (
    select
        prev_event_name,
        event_name,
        n,
        not coalesce(allowed_by_documented_graph, false) as undocumented,
    from agg_transition_counts
    where prev_event_type is not null
),

totals as (
    select
        coalesce(sum(n), 0) as transitions_total,
        coalesce(sum(n) filter (where undocumented), 0) as transitions_undocumented,
        count(*) filter (where undocumented) as undocumented_types,
        coalesce(sum(n) filter (where prev_event_name = 'SUBMIT' and event_name = 'EVICT'), 0)
            as evict_after_submit,
        coalesce(sum(n) filter (where prev_event_name = 'SUBMIT' and event_name = 'SUBMIT'), 0)
            as submit_after_submit,
    from moves
),

final as (
    select
        transitions_total,
        transitions_undocumented,
        coalesce(transitions_undocumented / nullif(transitions_total, 0), 0) as undocumented_share,
        undocumented_types,
        evict_after_submit,
        submit_after_submit,
        'undocumented_share' as headline_key,
        printf(
            'of %,d transitions between consecutive events of a task, against the documented graph',
            transitions_total
        ) as condition,
    from totals
)

select * from final
