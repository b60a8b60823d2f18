// The English text the demo tokenizer learns its merges from: plain prose written for this
// project, so common words ("the", "and", "model") become single tokens.
#include "model/synth/demo_text.h"

namespace infer {

std::string_view demo_training_text() {
  // The text starts after the first newline of the literal.
  static constexpr std::string_view kText = R"(
The lighthouse stood at the end of the long stone pier, and every night the keeper climbed the
narrow stairs to light the lamp. She had done this for many years, in summer and in winter, when
the sea was calm and when the waves were high. The ships that passed in the dark could see the
light from far away, and they knew where the rocks were.

In the morning she would write in her book. She wrote down the weather, the wind and the number of
ships she had seen. Some days there were only two or three; other days there were more than she
could count. She liked to think about where they were going and what they were carrying: grain and
wood, coal and cloth, letters from one country to another.

A small cat lived with her in the house at the bottom of the tower. The cat did not care about
ships. It cared about fish, about the warm place near the stove, and about the bird that sat on
the roof every afternoon. When the keeper read in the evening, the cat slept on her feet.

People in the town said that the keeper was a quiet woman, but that was not quite true. She talked
to the cat, to the sea and to the wind. She sang old songs while she cleaned the glass of the
lamp. She simply did not talk very much to people, because there were not many people on the pier.

One winter a great storm came from the north. The wind was so strong that the windows shook and
the water rose over the stones of the pier. The keeper went up the stairs with her coat and her
lamp, and she stayed at the top of the tower all night. She kept the light burning until the sun
came up, and in the morning she saw that every ship had found its way home.

This is a story about a lighthouse, but it is also a story about work that nobody sees. Every day
many people do small things that keep the world running: they clean the streets, they fix the
pipes, they check the lights. When the work is done well, nobody notices it at all.

A language model is a program that reads text and learns to guess the next word. It does not read
words the way a person does. First the text is cut into small pieces called tokens. A token can be
a whole word, a part of a word, or a single letter. Common words such as "the", "and" or "of" are
usually one token each, while rare words are split into several pieces.

The model turns each token into a list of numbers. Then it passes those numbers through many
layers. Each layer looks at the tokens that came before, mixes what it finds, and writes the
result back. At the end, the model gives a score to every token in its vocabulary, and the token
with the highest score is the best guess for what comes next.

To write a long answer, the model repeats this step again and again: it guesses one token, adds it
to the text, and then guesses the next one. That is why a model that runs fast can answer quickly,
and why the memory of the computer matters so much. For every new token, the computer must read
all the weights of the model from memory.

This small demo model was not trained. Its weights are random numbers, so the words it writes will
not make sense. It is here so that you can try the program, test the speed of your computer and
check that everything works, before you download a real model that knows how to speak.

Numbers and symbols are part of text too: 1, 2, 3, 10, 100, 2024, 3.14, 50%, $5, (a), [b], {c}, a
+ b = c, x * y, 7 - 4, 8 / 2, "quotes", 'single', question? answer! yes; no: maybe... Good
morning. Good evening. Thank you very much. How are you today? I am fine, thank you. What time is
it? It is time to go home. Where is the station? The station is near the river.

The village behind the pier had one street, one school and one small shop. The shop sold bread,
milk, eggs, apples, soap, candles and newspapers that were always two days old. The woman who ran
the shop knew everyone by name, and she knew what everyone would buy before they asked for it.
Children came to the shop after school to buy sweets, and old men came in the morning to read the
newspaper and talk about the weather, the price of fish and the government.

In spring the fields around the village turned green, and the farmers worked from early morning
until late in the evening. They planted potatoes, beans and corn. In summer the days were long and
warm, and families walked along the beach after dinner. In autumn the leaves turned yellow and
red, and the wind came back from the sea. In winter the nights were long and dark, and the light
of the tower was the brightest thing anyone could see.

Computers store numbers in memory, and memory has a speed. A processor can add and multiply very
quickly, but it often has to wait for the numbers it needs. When a model has billions of weights,
the time it takes to read them is usually longer than the time it takes to do the arithmetic. This
is why people make models smaller: they store each weight with fewer bits, so that there is less
to read for every token. A weight that used sixteen bits can often be stored with eight or even
four bits, and the model still gives almost the same answers.

A graphics card has its own memory, which is much faster than the main memory of the computer. If
the whole model fits in that memory, the card can read the weights many times faster, and the
model can write many more tokens every second. If the model does not fit, some of the work has to
stay on the processor, and the program must decide which layers go where.

When you ask the model a question, the program first reads your words and turns them into tokens.
Then it runs the model over all of them at once, which is called the prompt. After that it writes
the answer one token at a time, which is called decoding. The program keeps a cache of what each
layer has already computed, so that it does not have to read the whole prompt again for every new
token. Some layers only look at the most recent tokens, through a sliding window, and their cache
stays small no matter how long the conversation becomes.

The keeper did not know anything about computers, but she understood the idea of a window. From
the top of the tower she could only see so far, and the ships that were beyond the line of the sea
did not exist for her until they came closer. She did not need to see all of them. She only needed
to keep the light burning, and to see the ones that were near.

Tomorrow will be another day. The keeper will climb the stairs again, the cat will sleep near the
stove, and the ships will pass in the night, looking for the light that tells them they are safe.
)";
  return kText.substr(1);
}

}  // namespace infer
