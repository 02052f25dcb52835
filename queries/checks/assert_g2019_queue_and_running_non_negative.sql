-- agg_g2019_queue_length and agg_g2019_running_instances: counts of instances are never negative,
-- and the batch-queued instances are part of the waiting ones
with

queue as (
    select
        time,
        'queue' as series,
    from agg_g2019_queue_length
    where queue_length < 0 or queued_length < 0 or queued_length > queue_length
),

running as (
    select
        time,
        'running' as series,
    from agg_g2019_running_instances
    where running_instances < 0
),

final as (
    select * from queue
    union all
    select * from running
)

select * from final
