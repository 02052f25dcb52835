-- the numbers the queue page states (docs/methods.md §1.3, Zhu et al. Figs. 4-5), one row, over
-- the times inside the window (before 2^63-1): queue_paper_end and queue_end = agg_queue_length's
-- paper and corrected series at the latest time, queue_gap_end = their difference (the pending
-- EVICTs the paper's formula never removes), queue_max = the corrected series' maximum;
-- running_max and running_end = agg_running_tasks' maximum and value at its latest time; end_day
-- = the queue's latest time in days from the window start. A series without a time in the
-- window counts 0. headline_key names the number the index shows beside the page's link and
-- condition what it holds under.
with

queue as (
    select
        coalesce(arg_max(queue_length_paper, time), 0) as queue_paper_end,
        coalesce(arg_max(queue_length, time), 0) as queue_end,
        coalesce(max(queue_length), 0) as queue_max,
        max(time) as end_time,
    from agg_queue_length
    where time is not null and time < $time_after_window_us
),

running as (
    select
        coalesce(max(running_tasks), 0) as running_max,
        coalesce(arg_max(running_tasks, time), 0) as running_end,
    from agg_running_tasks
    where time is not null and time < $time_after_window_us
),

final as (
    select
        queue.queue_paper_end,
        queue.queue_end,
        queue.queue_paper_end - queue.queue_end as queue_gap_end,
        queue.queue_max,
        running.running_max,
        running.running_end,
        (greatest(queue.end_time, $window_start_us) - $window_start_us) / 86400000000 as end_day,
        'queue_end' as headline_key,
        printf(
            'tasks submitted in the loaded parts still waiting at the latest event, day %.2f of '
            || 'the window; pending EVICTs removed',
            (greatest(queue.end_time, $window_start_us) - $window_start_us) / 86400000000
        ) as condition,
    from queue
    cross join running
)

select * from final
