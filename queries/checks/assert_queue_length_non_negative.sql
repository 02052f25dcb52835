-- once the window starts, no fewer than zero tasks can be waiting
with

final as (
    select
        time,
        queue_length_paper,
        queue_length,
    from agg_queue_length
    where time >= $window_start_us
        and (queue_length < 0 or queue_length_paper < 0)
)

select * from final
