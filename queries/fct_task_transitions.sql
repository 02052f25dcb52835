-- every task event paired with the task's previous event (docs/methods.md §1.1; Zhu et al. §2.2, method 3-2).
-- order within a task is (time, source_file, source_row): same-microsecond events keep file order.
-- times 0 (before the window) and 2^63-1 (after it) are kept: they sort first and last, so a task
-- alive at the window start still shows its SUBMIT -> SCHEDULE pair.
-- prev_event_type is null for the first event of a task in the data (its history may predate it).
with

events as (
    select
        job_id,
        task_index,
        time,
        event_type,
        priority,
        cpu_request,
        memory_request,
        machine_id,
        missing_info,
        source_file,
        source_row,
    from task_events
),

ordered as (
    select
        *,
        row_number() over task_order as event_seq,
        lag(time) over task_order as prev_time,
        lag(event_type) over task_order as prev_event_type,
        lag(priority) over task_order as prev_priority,
        lag(cpu_request) over task_order as prev_cpu_request,
        lag(memory_request) over task_order as prev_memory_request,
        -- incarnation n = the events from the task's n-th SUBMIT on; 0 = before its first SUBMIT
        cast(count(*) filter (where event_type = 0) over (
            task_order rows between unbounded preceding and current row
        ) as bigint) as incarnation,
    from events
    window task_order as (partition by job_id, task_index order by time, source_file, source_row)
),

final as (
    select
        job_id,
        task_index,
        event_seq,
        incarnation,
        time,
        prev_time,
        prev_event_type,
        event_type,
        priority,
        priority >= $production_priority as is_production,
        prev_priority,
        cpu_request,
        memory_request,
        prev_cpu_request,
        prev_memory_request,
        machine_id,
        missing_info,
        source_file,
        source_row,
        -- the documented graph (format doc, Borg paper): pending = after SUBMIT / UPDATE_PENDING,
        -- running = after SCHEDULE / UPDATE_RUNNING, dead = after EVICT FAIL FINISH KILL LOST.
        -- the paper's findings break it: SUBMIT -> EVICT occurs, SUBMIT -> SUBMIT never does.
        case
            when prev_event_type is null then null
            when prev_event_type in (0, 7) then event_type in (1, 3, 5, 6, 7)
            when prev_event_type in (1, 8) then event_type in (2, 3, 4, 5, 6, 8)
            when prev_event_type in (2, 3, 4, 5, 6) then event_type = 0
            else false
        end as allowed_by_documented_graph,
    from ordered
    -- a stable row order: repeated and partitioned runs write identical files
    order by job_id, task_index, event_seq
)

select * from final
