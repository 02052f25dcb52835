-- the partitions of one per-task table, concatenated in a stable order: by task, and within a
-- task in its partition file's order (each table's own sort; a task lies in one partition)
with
parts as (
    select * from read_parquet($files, file_row_number = true, filename = true)
),

final as (
    select * exclude (file_row_number, filename) from parts
    order by job_id, task_index, filename, file_row_number
)

select * from final
