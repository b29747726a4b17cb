"""A seeded generator of readable English-like documents: tiny-lm's training text and prompts.

Why generated text and not a downloaded corpus: the project builds, trains and tests with no
network, and ``tiny-lm`` needs text whose every word is known (a test checks that what the model
writes is words of its corpus). Five kinds of short document — weather reports, recipes, little
stories, travel notes and letters — come from small grammars: templates whose ``{slot}``\\ s are
filled from word lists, recursively, so sentences vary while staying grammatical. A few names
carry accents (Zürich, crème brûlée) so the byte-level tokenizer meets multi-byte characters.

As in ``data.py``, document ``i`` of a ``(split, seed)`` stream comes from its own generator
seeded with ``(split, seed, i)``: streams are reproducible, the ``train``/``test``/``heldout``
splits never share a document, and a document does not depend on how many were asked for.
Training uses ``train`` and ``test``; the pipeline's prompts come from ``heldout``.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np

SPLITS = {"train": 1, "test": 2, "heldout": 3}
_STREAM_KIND = 7  # the first seed word: keeps these streams apart from data.py's

# ---- word lists (a slot's name; a trailing digit, as in {animal2}, is a second, fresh pick) ---
_WORDS: dict[str, list[str]] = {
    # shared
    "weekday": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "city": ["Lisbon", "Porto", "Seville", "Florence", "Naples", "Vienna", "Prague", "Kraków",
             "Budapest", "Zürich", "Geneva", "Munich", "Hamburg", "Copenhagen", "Malmö", "Oslo",
             "Bergen", "Helsinki", "Tallinn", "Riga", "Dublin", "Edinburgh", "York", "Bristol",
             "Lyon", "Marseille", "Bordeaux", "Ghent", "Utrecht", "Valencia", "Granada", "Kyoto",
             "Osaka", "Seoul", "Hanoi", "Montréal", "Quebec", "Boston", "Chicago", "Denver",
             "Lima", "Cusco", "São Paulo", "Reykjavík", "Istanbul", "Athens", "Ljubljana"],
    "name": ["Anna", "Ben", "Clara", "Daniel", "Elif", "Felix", "Greta", "Hassan", "Ingrid",
             "José", "Keiko", "Liam", "Marta", "Noah", "Olga", "Pedro", "Rosa", "Sven", "Tariq",
             "Yusuf", "Zoe", "Chloé", "Björn", "Amélie", "Ravi", "Mei", "Tomás", "Nadia"],
    "relative": ["grandmother", "grandfather", "aunt", "uncle", "mother", "father", "neighbour",
                 "sister", "brother", "cousin"],
    "water": ["river", "stream", "pond", "lake", "canal", "sea"],
    "fruit": ["apple", "pear", "plum", "cherry", "lemon", "strawberry", "banana", "apricot",
              "rhubarb", "peach", "blackberry", "orange"],
    "dessert": ["cake", "tart", "crumble", "pie", "pudding", "compote", "muffins",
                "crème brûlée", "jam"],
    "direction": ["north", "south", "east", "west", "north west", "south east", "sea"],
    "clock": ["nine o'clock", "ten o'clock", "noon", "two in the afternoon", "four o'clock",
              "six in the evening", "midnight", "seven o'clock", "half past eight"],
    # weather
    "sky_start": ["cloudy", "bright and clear", "grey and damp", "cold but sunny", "windy",
                  "calm and misty", "wet", "frosty"],
    "sky_adj": ["clear", "cloudy", "grey", "bright", "hazy", "overcast", "sunny", "stormy",
                "pale blue", "heavy"],
    "air_feel": ["fresh", "warm", "cool", "humid", "crisp", "heavy", "mild", "chilly", "damp"],
    "region": ["hills", "coast", "valley", "north of the city", "surrounding villages",
               "lake district", "river plain", "mountains", "islands"],
    "night_adj": ["quiet", "cold", "stormy", "warm", "clear", "windy", "foggy", "long"],
    "sky_noun": ["sunshine", "low clouds", "light rain", "heavy rain", "a clear sky",
                 "patchy fog", "scattered showers", "thick cloud", "bright spells",
                 "a few snow flurries", "blue skies"],
    "precip": ["a few showers", "light drizzle", "heavy rain", "thunderstorms", "sleet",
               "wet snow", "a passing shower", "hail", "steady rain"],
    "later": ["later in the day", "around noon", "by the evening", "in the afternoon",
              "before lunch", "overnight", "after dark"],
    "landscape": ["fields", "harbour", "river", "valley", "lake", "hills", "old town", "park",
                  "bay", "forest"],
    "spread": ["spread", "drift", "gather", "roll in", "break up"],
    "temp_feel": ["warm", "cold", "mild", "cool", "hot", "fresh"],
    "wind_strength": ["light", "gentle", "strong", "gusty", "cold", "steady", "fresh", "bitter"],
    "evening_sky": ["the clouds break and the stars come out",
                    "the rain eases and the streets dry out",
                    "a cold wind picks up from the {direction}",
                    "the sky turns pink over the {landscape}",
                    "the temperature falls quickly", "the fog returns to the {landscape}"],
    "outdoor_activity": ["walk in the park", "ride a bike", "go to the beach",
                         "work in the garden", "dry the washing outside", "visit the market",
                         "go for a run", "take the children to the zoo", "climb the hills",
                         "sail on the {water}", "have a picnic"],
    "advice_plan": ["go early", "bring a jacket", "check the forecast again at noon",
                    "pack a raincoat", "wear good shoes", "take some water"],
    "road_kind": ["wet", "icy", "mountain", "coastal", "narrow", "country"],
    "when_next": ["tomorrow morning", "later today", "at the same time tomorrow",
                  "after the news", "this evening"],
    # recipes
    "vegetables": ["tomatoes", "carrots", "potatoes", "onions", "mushrooms", "peppers",
                   "leeks", "courgettes", "beans", "peas", "beetroots", "parsnips",
                   "spinach leaves", "radishes", "shallots"],
    "vegetable": ["tomato", "carrot", "potato", "onion", "mushroom", "pepper", "leek",
                  "pumpkin", "spinach", "cabbage", "cauliflower", "pea", "lentil",
                  "sweet potato", "beetroot", "fennel", "broccoli", "squash"],
    "protein": ["chicken", "salmon", "tofu", "lamb", "beef", "chickpeas", "eggs", "white beans",
                "prawns", "cod", "pork", "halloumi", "mackerel", "duck"],
    "side": ["rice", "fresh bread", "a green salad", "roast potatoes", "couscous", "noodles",
             "polenta", "flatbread", "steamed greens", "mashed potatoes"],
    "grain": ["rice", "barley", "couscous", "quinoa", "pasta", "noodles", "oats", "bulgur"],
    "cheese": ["parmesan", "feta", "goat cheese", "cheddar", "mozzarella", "ricotta",
               "gruyère"],
    "herb": ["parsley", "basil", "thyme", "rosemary", "mint", "coriander", "dill", "sage",
             "chives", "oregano"],
    "recipe_adj": ["simple", "quick", "warm", "spicy", "creamy", "rustic", "easy", "hearty",
                   "fresh", "golden", "smoky", "light", "zesty"],
    "curry_kind": ["green", "red", "yellow", "mild", "coconut"],
    "dish": ["{recipe_adj} {vegetable} soup", "{protein} with {side}",
             "{recipe_adj} {vegetable} and {vegetable2} salad", "{fruit} {dessert}",
             "{recipe_adj} {grain} with {vegetables}", "{protein} stew",
             "baked {vegetables} with {cheese}", "{curry_kind} {protein} curry",
             "{recipe_adj} {protein} and {vegetable} pie", "roast {protein} with {herb}"],
    "occasion": ["busy weeknight", "lazy Sunday", "cold winter evening", "summer picnic",
                 "family dinner", "birthday party", "rainy afternoon"],
    "recipe_when": ["the garden is full of {vegetables}", "friends drop by without warning",
                    "you have only half an hour", "the weather turns cold",
                    "the market has fresh {vegetables}"],
    "ingredient": ["{#2-6} {vegetables}", "a cup of {grain}", "{#1-5}00 grams of {protein}",
                   "a pinch of salt", "two spoons of olive oil", "a small bunch of {herb}",
                   "one {vegetable}", "{#2-4} cloves of garlic", "half a lemon",
                   "a knob of butter", "some {cheese}", "a glass of water", "a spoon of honey",
                   "a tin of tomatoes", "a handful of {herb}"],
    "prep_verb": ["wash", "peel", "chop", "slice", "dice", "rinse", "grate", "trim"],
    "pan": ["large pan", "heavy pot", "frying pan", "deep saucepan", "wide skillet",
            "roasting tin"],
    "heat": ["medium", "low", "high", "gentle"],
    "smell": ["sweet", "nutty", "rich", "good", "fragrant"],
    "often": ["now and then", "often", "gently", "all the time", "once or twice"],
    "simmer_verb": ["simmer", "bubble gently", "cook slowly", "rest"],
    "seasoning": ["black pepper", "paprika", "cumin", "a little chilli", "lemon juice",
                  "nutmeg", "soy sauce", "fresh herbs", "a splash of vinegar"],
    "serve_how": ["hot", "warm", "cold", "straight away", "in deep bowls", "on warm plates"],
    "bread": ["bread", "toast", "sourdough", "rye bread", "cornbread"],
    "variation": ["add a handful of {herb} at the end", "use {protein} instead",
                  "swap the {grain} for {grain2}", "leave out the {cheese}",
                  "make it spicy with a little chilli", "double the amount and freeze half",
                  "serve it with {side} instead"],
    # stories
    "hero": ["Pip", "Mila", "Tomas", "Lulu", "Bruno", "Fern", "Oskar", "Rosie", "Juniper",
             "Kiki", "Barnaby", "Nell", "Otto", "Poppy", "Zane", "Hazel", "Ivo", "Greta",
             "Moss", "Clementine", "Wren", "Basil"],
    "animal": ["mouse", "rabbit", "fox", "owl", "hedgehog", "badger", "duck", "squirrel",
               "frog", "turtle", "bear", "goat", "cat", "otter", "sparrow", "lamb", "mole",
               "deer", "beaver", "pig", "donkey", "crow"],
    "char_adj": ["little", "curious", "shy", "brave", "clever", "sleepy", "cheerful", "tiny",
                 "young", "clumsy", "gentle", "proud", "lonely", "busy", "old", "kind"],
    "home_place": ["in a hollow tree by the river", "under a big green hill",
                   "at the edge of a quiet forest", "in a cottage near the sea",
                   "on a small farm", "in a burrow beneath an oak", "behind the old mill",
                   "in a garden full of roses", "at the top of a windy hill"],
    "time_unit": ["morning", "evening", "day", "spring", "summer", "winter", "week"],
    "habit": ["collected {collectibles} along the path",
              "watched the {sky_story} from the top of the hill",
              "counted the boats on the {water}", "baked bread for the neighbours",
              "practised singing by the pond", "tidied the little house from top to bottom",
              "visited an old friend across the {water}"],
    "collectibles": ["shiny pebbles", "acorns", "feathers", "pine cones", "sea shells",
                     "bright leaves", "buttons"],
    "sky_story": ["clouds", "stars", "birds", "sunset", "moon"],
    "hobby": ["read old books", "dance in the rain", "play the fiddle", "paint the hills",
              "explore", "tell long stories", "grow tomatoes"],
    "worry": ["was afraid of the dark", "had never left home", "was too shy to make friends",
              "always got lost", "could not swim", "worried about everything"],
    "day_part": ["morning", "evening", "night", "afternoon", "winter morning", "summer evening",
                 "rainy afternoon", "autumn day"],
    "found_thing": ["a golden key", "a map with a red cross on it", "a tiny door",
                    "a lost kitten", "a glowing stone", "a letter with no name",
                    "a box of old seeds", "a broken compass", "a silver bell"],
    "found_place": ["under a stone", "in the tall grass", "by the well",
                    "at the bottom of the garden", "inside a hollow log", "on the doorstep",
                    "behind the barn"],
    "weather_event": ["storm", "great wind", "thick fog", "heavy snow", "long rain"],
    "sound": ["a strange song", "a soft crying", "loud knocking", "a tiny bell",
              "a deep rumble"],
    "story_place": ["forest", "mountain", "meadow", "old castle", "river bank", "deep valley",
                    "island", "marsh", "orchard", "cave"],
    "feeling": ["surprised", "puzzled", "excited", "a little scared", "very curious",
                "delighted", "worried"],
    "exclaim": ["What could this be?", "I must find out where it came from!", "Oh dear, oh dear!",
                "This is the start of an adventure!", "Who left this here?",
                "I will not give up!"],
    "friend": ["an old {animal2}", "a wise {animal2}", "the {animal2} next door",
               "a {char_adj2} {animal2}", "a {animal2} named {hero2}"],
    "antagonist": ["a grumpy {animal2}", "a hungry wolf", "a sly crow", "a sleepy giant",
                   "a troll who lived under a bridge", "a proud peacock"],
    "antagonist_act": ["would not let them pass", "wanted all their food", "laughed at them",
                       "asked them a riddle", "blocked the path with a huge rock",
                       "told them to turn back"],
    "adventure": ["walked all the way to the {story_place}", "crossed the {water} on a log",
                  "climbed to the top of the {story_place}",
                  "followed the {trail} until it grew dark",
                  "built a small boat from {material}",
                  "searched every corner of the {story_place}"],
    "trail": ["path", "stream", "footprints", "stars", "trail of crumbs"],
    "material": ["sticks and leaves", "an old door", "bark and string", "a wooden box"],
    "solution": ["shared the last of the {snack}", "sang a song so sweet that everyone stopped "
                 "to listen", "thought of a clever plan", "was brave and did not run away",
                 "said sorry and offered to help", "answered the riddle at once"],
    "snack": ["berries", "bread", "honey cake", "apples", "nuts", "cheese"],
    "ending": ["went home tired but happy", "learned that {lesson}",
               "found the way back before the moon rose", "made a new friend",
               "never forgot that {day_part}", "planted the seeds by the door"],
    "lesson": ["small friends can be great friends", "kindness is worth more than gold",
               "it is good to ask for help", "patience brings its own reward",
               "being different is not a bad thing", "a shared meal tastes better"],
    "bad_feeling": ["lonely", "afraid", "bored", "sad", "lost"],
    # travel
    "transport": ["night train", "early bus", "ferry", "morning flight", "slow train", "coach",
                  "boat", "last tram"],
    "arrive_time": ["just after noon", "late at night", "before sunrise", "in the pouring rain",
                    "three hours late", "right on time", "in time for dinner"],
    "lodging": ["hotel", "guest house", "room", "hostel", "little flat", "cabin"],
    "lodging_desc": ["small but very clean", "right above a bakery",
                     "on the fifth floor with no lift", "quiet and full of plants",
                     "close to the station", "older than it looked online",
                     "next to a noisy bar"],
    "landmark": ["cathedral", "old harbour", "central market", "castle", "city museum",
                 "botanical garden", "main square", "bridge", "lighthouse", "old library",
                 "town hall", "fish market"],
    "scene": ["a street band was playing", "pigeons filled every corner",
              "a wedding party was taking photos", "the crowds were already thick",
              "an old man sold roasted chestnuts",
              "children chased each other around the fountain",
              "a painter was working on a huge canvas"],
    "street_adj": ["narrow and steep", "wide and busy", "quiet", "wet from the rain",
                   "full of bicycles", "lined with cafés", "empty"],
    "street_scene": ["every window had flowers", "the shops were closing for lunch",
                     "music came from an open door", "the smell of coffee was everywhere",
                     "cats slept on the warm steps"],
    "food_item": ["grilled fish", "a bowl of noodles", "fresh bread and cheese",
                  "a spicy stew", "dumplings", "a slice of {fruit} pie", "soup of the day",
                  "pancakes with berries", "rice with vegetables", "a crêpe with jam"],
    "eatery": ["café", "bistro", "street stall", "family restaurant", "bakery", "noodle bar"],
    "weather_past": ["started to rain", "got very hot", "turned cold and windy", "stayed grey",
                     "cleared up", "snowed a little"],
    "activity_past": ["hid in a museum for two hours", "sat in a café and wrote postcards",
                      "took a boat along the {water}", "went back to the {lodging} for a nap",
                      "hiked up to the viewpoint", "wandered through the {landmark2}"],
    "evening_past": ["watched the sunset from the {landmark2}", "found a tiny jazz bar",
                     "cooked pasta in the shared kitchen", "got lost on the way home",
                     "ate ice cream by the {water}", "planned the next day over tea"],
    "closing_thought": ["Tomorrow we leave for {city2}.", "I could stay here for a month.",
                        "My feet hurt, but it was worth it.",
                        "We still have not seen the {landmark2}.",
                        "{city2} is next, if the trains run on time."],
    # letters
    "family": ["the children", "your family", "your parents", "the dog", "everyone at home"],
    "letter_status": ["much the same as always", "busy but good",
                      "a little quiet since you left", "changing fast", "calm and sunny"],
    "letter_event": ["went to a concert in the park", "painted the kitchen yellow",
                     "baked {fruit} {dessert} for the neighbours", "took the train to {city2}",
                     "visited my {relative}, who is much better now",
                     "started learning to play the {instrument}"],
    "flower": ["roses", "tulips", "sunflowers", "daisies", "lavender", "poppies"],
    "work_adj": ["very busy", "slow", "strange", "tiring", "better than last year"],
    "coping": ["try to walk by the {water} every evening", "am learning to say no",
               "take long baths", "read a chapter every night"],
    "memory": ["got caught in the rain in {city2}", "missed the last bus and walked home",
               "stayed up all night talking", "cooked dinner for twelve people",
               "tried to build a boat"],
    "topic": ["your new job", "the trip", "your garden", "the children",
              "what you are reading", "life in {city2}"],
    "instrument": ["piano", "guitar", "violin", "cello", "flute", "drums"],
    "sign_off": ["Love", "Best wishes", "Yours", "Warm regards", "See you soon"],
}

# ---- document kinds: a title, then sections in order, each (probability, templates) -------
_Section = tuple[float, list[str]]
_KINDS: dict[str, tuple[list[str], list[_Section]]] = {
    "weather": (["Weather for {=city}, {=weekday}.\n", "{=weekday} forecast for {=city}\n"], [
        (1.0, ["{=weekday} starts {sky_start} in {=city}.",
               "Good morning from {=city}, where the sky is {sky_adj} and the air feels "
               "{air_feel}.", "Here is the forecast for {=city} and the {region}.",
               "After a {night_adj} night, {=city} wakes up to {sky_noun}."]),
        (0.8, ["Expect {sky_noun} in the morning, with {precip} {later}.",
               "The morning will be {sky_adj}, but {precip} may arrive {later}.",
               "Early risers will see {sky_noun} over the {landscape}.",
               "Fog lifts slowly from the {landscape} before {clock}."]),
        (0.7, ["By the afternoon, {sky_noun} will {spread} across the {region}.",
               "The afternoon looks {sky_adj} and {air_feel}.",
               "Around {clock}, {precip} moves in from the {direction}."]),
        (0.9, ["Highs will reach {#12-31} degrees, and lows will fall to about {#2-11}.",
               "The temperature stays near {#4-26} °C for most of the day.",
               "It will feel {temp_feel} for the time of year, with a high of {#8-30} degrees.",
               "Tonight the temperature drops to {#0-9} degrees."]),
        (0.7, ["A {wind_strength} wind blows from the {direction}.",
               "Winds from the {direction} reach {#10-60} kilometres per hour near the "
               "{landscape}.", "The wind stays {wind_strength} all day."]),
        (0.6, ["In the evening, {evening_sky}.", "Tonight will be {night_adj} with {sky_noun}.",
               "Expect {precip} after dark."]),
        (0.8, ["Take an umbrella if you go out.", "It is a good day to {outdoor_activity}.",
               "Drivers should take care on the {road_kind} roads.",
               "Keep a warm coat close by.",
               "Remember to drink water and stay in the shade.",
               "If you plan to {outdoor_activity}, {advice_plan}."]),
        (0.6, ["The next update comes at {clock}.",
               "That is all from the weather desk for now.",
               "We will be back with more {when_next}."]),
    ]),
    "recipe": (["{dish}\n"], [
        (1.0, ["Serves {#2-6}. Ready in {#15-75} minutes."]),
        (0.7, ["This is a {recipe_adj} dish for a {occasion}.",
               "My {relative} used to make this every {weekday}.",
               "A {recipe_adj} meal that takes little effort.",
               "This recipe is perfect when {recipe_when}."]),
        (1.0, ["You will need {ingredient}, {ingredient}, {ingredient} and {ingredient}.",
               "For this you need {ingredient}, {ingredient} and {ingredient}."]),
        (0.9, ["First, {prep_verb} the {vegetables} and {prep_verb} the {herb}.",
               "Start by washing the {vegetables}."]),
        (0.8, ["Heat the oil in a {pan} over {heat} heat.",
               "Warm a little butter in a {pan}."]),
        (0.6, ["Add the garlic and cook for {#1-3} minutes, until it smells {smell}."]),
        (0.9, ["Add the {vegetables} and cook for {#4-15} minutes, stirring {often}.",
               "Put in the {protein} and brown it on all sides."]),
        (0.6, ["Pour in the water and bring it to the boil.",
               "Lower the heat and let it {simmer_verb} for {#10-40} minutes.",
               "Meanwhile, cook the {grain} in salted water."]),
        (0.6, ["Stir in the {cheese} and the {herb}.",
               "Season with salt, pepper and {seasoning}.",
               "Taste it and add more {seasoning} if you like.",
               "Bake in a hot oven for {#20-45} minutes, until golden."]),
        (1.0, ["Serve {serve_how} with {side}.",
               "Serve it {serve_how}, with a slice of {bread} on the side."]),
        (0.6, ["If you like, you can {variation}.",
               "Leftovers keep for {#2-4} days in the fridge.",
               "Children can help to wash the {vegetables}."]),
    ]),
    "story": ([""], [
        (1.0, ["Once upon a time, a {=char_adj} {=animal} named {=hero} lived {home_place}.",
               "There was once a {=char_adj} {=animal} called {=hero}, who lived "
               "{home_place}.", "Long ago, {home_place}, there lived a {=char_adj} {=animal} "
               "named {=hero}."]),
        (0.8, ["Every {time_unit}, {=hero} {habit}.",
               "{=hero} loved to {hobby}, but {worry}."]),
        (1.0, ["One {day_part}, {=hero} found {found_thing} {found_place}.",
               "One {day_part}, a {weather_event} came over the {story_place}.",
               "One day, {=hero} heard {sound} coming from the {story_place}."]),
        (0.8, ["The little {=animal} was {feeling}.", "\"{exclaim}\" said {=hero}."]),
        (0.8, ["{=hero} asked {friend} for help.", "Soon {=hero} met {friend}."]),
        (0.9, ["Together they {adventure}.", "So the {=animal} {adventure}."]),
        (0.6, ["On the way, they met {antagonist}, who {antagonist_act}."]),
        (0.6, ["But {=hero} {solution}."]),
        (1.0, ["In the end, {=hero} {ending}.", "That night, {=hero} {ending}."]),
        (0.6, ["And from that day on, {=hero} was never {bad_feeling} again.",
               "The moral of the story is that {lesson}.", "The end."]),
    ]),
    "travel": (["Day {#1-14} in {=city}\n", "Travel notes: {=city}\n"], [
        (1.0, ["We took the {transport} from {city2} and arrived {arrive_time}.",
               "The {transport} from {city2} got us here {arrive_time}."]),
        (0.8, ["Our {lodging} was {lodging_desc}.", "The {lodging} is {lodging_desc}."]),
        (0.9, ["In the morning we walked to the {landmark}, where {scene}.",
               "We started at the {landmark}, where {scene}."]),
        (0.6, ["The streets were {street_adj}, and {street_scene}."]),
        (0.8, ["For lunch we had {food_item} at a small {eatery} near the {landmark}.",
               "We ate {food_item} at a {eatery} by the {water}."]),
        (0.8, ["In the afternoon it {weather_past}, so we {activity_past}."]),
        (0.7, ["In the evening we {evening_past}.", "Later we {evening_past}."]),
        (0.8, ["{closing_thought}"]),
    ]),
    "letter": (["Dear {=name},\n"], [
        (0.7, ["Thank you for your letter, it made me smile.",
               "It has been too long since I last wrote."]),
        (0.8, ["I hope you and {family} are well."]),
        (0.9, ["Things here in {=city} are {letter_status}."]),
        (0.9, ["Last {weekday}, I {letter_event}.", "This week I {letter_event}."]),
        (0.5, ["The garden is full of {flower} this time of year."]),
        (0.6, ["Work has been {work_adj}, but I {coping}."]),
        (0.7, ["Do you remember when we {memory}?"]),
        (0.4, ["I found a photo of it the other day."]),
        (0.9, ["Write back soon and tell me about {topic}."]),
        (1.0, ["\n{sign_off},\n{name2}"]),
    ]),
}
KINDS: tuple[str, ...] = tuple(_KINDS)

_SLOT = re.compile(r"\{(=?)(#\d+-\d+|[a-z_]+\d?)\}")
_A_AN = re.compile(r"\b([Aa]) (?=[aeiouAEIOU])")
_SENTENCE_START = re.compile(r"(^|[.!?]\"?\s+|\n\"?)([a-zà-ÿ])")
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


class _Filler:
    """Fills one document's templates: ``{slot}`` is a fresh pick each time, ``{=slot}`` the
    same pick all through the document (a story's hero keeps its name), ``{#lo-hi}`` a whole
    number; picks may hold slots of their own."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.bound: dict[str, str] = {}

    def pick(self, options: Sequence[str]) -> str:
        return options[int(self.rng.integers(len(options)))]

    def fill(self, template: str) -> str:
        return _SLOT.sub(self._slot, template)

    def _slot(self, m: re.Match[str]) -> str:
        bind, key = m.group(1) == "=", m.group(2)
        if key.startswith("#"):
            lo, hi = (int(v) for v in key[1:].split("-"))
            return str(int(self.rng.integers(lo, hi + 1)))
        if bind and key in self.bound:
            return self.bound[key]
        value = self.fill(self.pick(_WORDS[key.rstrip("0123456789")]))
        if bind:
            self.bound[key] = value
        return value


def _tidy(text: str) -> str:
    """'a owl' → 'an owl'; a capital letter at each sentence start and after a line break."""
    text = _A_AN.sub(lambda m: m.group(1) + "n ", text)
    return _SENTENCE_START.sub(lambda m: m.group(1) + m.group(2).upper(), text)


def document(rng: np.random.Generator) -> str:
    """One document of a random kind: its title line (if the kind has one), then its
    sections, each present with its probability (the first of a kind is always there)."""
    kind = KINDS[int(rng.integers(len(KINDS)))]
    titles, sections = _KINDS[kind]
    f = _Filler(rng)
    parts = [f.fill(f.pick(titles))]
    for p, templates in sections:
        if rng.random() < p:
            sentence = f.fill(f.pick(templates))
            sep = "" if not parts[-1] or parts[-1].endswith("\n") or sentence.startswith("\n") \
                else " "
            parts.append(sep + sentence)
    return _tidy("".join(parts).strip())


def documents(n: int, seed: int = 0, split: str = "heldout", start: int = 0) -> list[str]:
    """Documents ``start .. start+n-1`` of the ``(split, seed)`` stream (see the module doc)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, not {split!r}")
    if n < 0 or seed < 0 or start < 0:
        raise ValueError("n, seed and start must be >= 0")
    return [document(np.random.default_rng([_STREAM_KIND, SPLITS[split], seed, i]))
            for i in range(start, start + n)]


def prompts(n: int, seed: int = 0) -> list[str]:
    """``n`` prompts: the first 30-70 % of the words of held-out documents (never trained on),
    cut after a word, so a good continuation is the rest of the document."""
    rng = np.random.default_rng([_STREAM_KIND, 99, seed])
    out = []
    for doc in documents(n, seed, "heldout"):
        ends = [m.end() for m in re.finditer(r"\S+", doc)]
        keep = max(1, int(len(ends) * rng.uniform(0.3, 0.7)))
        out.append(doc[:ends[keep - 1]])
    return out


def words(text: str) -> list[str]:
    """The lowercase words of ``text`` (runs of letters, accents included; no digits)."""
    return _WORD.findall(text.lower())


@functools.lru_cache(maxsize=4)
def vocabulary(n: int = 3000, seed: int = 0) -> frozenset[str]:
    """Every word of the first ``n`` training documents: what "a word of the corpus" means."""
    return frozenset(w for doc in documents(n, seed, "train") for w in words(doc))
