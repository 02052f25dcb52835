-- once the window starts, no fewer than zero tasks can be running
with

final as (
    select
        time,
        running_tasks,
    from agg_running_tasks
    where time >= $window_start_us
        and running_tasks < 0
)

select * from final
