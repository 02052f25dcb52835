-- once the window starts, no fewer than zero tasks can be waiting, and the batch-queued tasks are
-- part of the waiting ones
with

final as (
    select
        time,
        queue_length_paper,
        queue_length,
        queued_length,
    from agg_queue_length
    where time >= $window_start_us
        and (
            queue_length < 0 or queue_length_paper < 0 or queued_length < 0
            or queued_length > queue_length
        )
)

select * from final
