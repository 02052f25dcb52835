-- fct_g2019_instance_transitions: one row per instance event (its source line), and a verdict on
-- the documented graph for every event that has a previous one (none for a first event)
with

duplicates as (
    select
        source_file,
        source_row,
        'more than one row for this event' as problem,
    from fct_g2019_instance_transitions
    group by source_file, source_row
    having count(*) > 1
),

verdicts as (
    select
        source_file,
        source_row,
        'verdict missing or given without a previous event' as problem,
    from fct_g2019_instance_transitions
    where (prev_event_type is null) != (allowed_by_documented_graph is null)
),

final as (
    select * from duplicates
    union all
    select * from verdicts
)

select * from final
