import agentstream as faust
from agentstream.web import View  # Faust: from faust.web import View

app = faust.App(
    "faust-word-count",
    broker="kafka://localhost:9092",
    store="memory://",
    topic_partitions=4,
    version=1,
)


class Sentence(faust.Record):
    text: str


class Word(faust.Record):
    word: str


sentences_topic = app.topic("faust-sentences", value_type=Sentence)
counts_topic = app.topic("faust-word-counts", key_type=str, value_type=int)
word_counts = app.Table("word_counts", default=int, help="Keep count of words (str to int).")


@app.agent(sentences_topic)
async def split_sentences(sentences):
    async for sentence in sentences:
        for word in sentence.text.lower().split():
            await count_words.send(value=Word(word=word))


@app.agent(value_type=Word)
async def count_words(words):
    async for word in words.group_by(Word.word):
        word_counts[word.word] += 1
        await counts_topic.send(key=word.word, value=word_counts[word.word])


@app.page("/count/{word}/")
@app.table_route(table=word_counts, match_info="word")
async def get_count(web, request, word):
    return web.json({word: word_counts[word]})


@app.page("/hello/")
class Hello(View):
    async def get(self, request):
        return self.json({"hello": "world", "app": self.app.conf.id})
