-- fct_g2019_instance_times: one row per (collection_id, instance_index, incarnation), and no
-- negative scheduling or execution time
with

duplicates as (
    select
        collection_id,
        instance_index,
        incarnation,
    from fct_g2019_instance_times
    group by collection_id, instance_index, incarnation
    having count(*) > 1
),

negative as (
    select
        collection_id,
        instance_index,
        incarnation,
    from fct_g2019_instance_times
    where scheduling_time_s < 0 or execution_time_s < 0
),

final as (
    select * from duplicates
    union all
    select * from negative
)

select * from final
