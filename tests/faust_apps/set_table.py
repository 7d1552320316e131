import agentstream as faust

app = faust.App("faust-set-table", broker="kafka://localhost:9092", topic_partitions=2)


class Visit(faust.Record):
    user: str
    page: str


visits_topic = app.topic("faust-visits", value_type=Visit)
user_pages_topic = app.topic("faust-user-pages", key_type=str)
pages_by_user = app.SetTable("pages_by_user")


@app.agent(visits_topic)
async def track_visits(visits):
    async for visit in visits.group_by(Visit.user):
        pages_by_user[visit.user].add(visit.page)
        await user_pages_topic.send(key=visit.user, value=sorted(pages_by_user[visit.user]))
