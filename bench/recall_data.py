"""A generated long-conversation data set for retrieval recall: two people chat for
hundreds of turns, a few turns plant facts, and each question names the turns that
answer it.

Nothing is downloaded: the generator is seeded, so a seed and the sizes fix every turn,
and ``fingerprint`` proves two runs saw the same data. It is built so that lexical and
dense retrieval fail differently, as they do on real dialogue:

- most questions paraphrase the evidence ("relocate" for "moved", "instrument" for
  "cello"), so only meaning connects them; the rest share distinctive words with it;
- every fact comes with distractor turns that share the question's words (the same
  speaker, "city", "work", "dog") but do not answer it, and with a similar fact about
  someone else (a cousin's move, a friend's new job);
- some facts are given as an answer to the other speaker's question ("So where did you
  end up?" / "Lisbon! ..."), so the evidence turn itself has few of the question's words;
- some facts change later (a new job, a new phone); the question asks for the current
  one and only the later turn is evidence, the earlier one is a near-perfect decoy;
- small talk fills the rest, on everyday topics that reuse the same vocabulary.

Memories are indexed as ``"<speaker>: <text>"``: the speaker's name is what ties "What
does Maya's partner do?" to a turn in which Maya says "my partner".
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Final

GENERATOR_VERSION: Final = "recall-data-1"


@dataclass(frozen=True)
class Turn:
    turn_id: str
    speaker: str
    text: str

    @property
    def memory_text(self) -> str:
        """What is stored as a memory: the speaker's name, then what they said."""
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True)
class Question:
    question_id: str
    text: str
    evidence: tuple[str, ...]
    """Turn ids; a hit is any of them in the top k."""
    category: str
    kind: str
    """``paraphrase`` (no content word shared with the evidence but names), ``lexical``,
    ``exchange`` (answered in reply to a question) or ``update`` (a later fact wins)."""


@dataclass(frozen=True)
class Conversation:
    conversation_id: str
    speakers: tuple[str, str]
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


@dataclass(frozen=True)
class DataSet:
    seed: int
    conversations: tuple[Conversation, ...]
    version: str = GENERATOR_VERSION

    @property
    def turn_count(self) -> int:
        return sum(len(c.turns) for c in self.conversations)

    @property
    def question_count(self) -> int:
        return sum(len(c.questions) for c in self.conversations)


# ---------------------------------------------------------------------------- vocabulary

NAMES: Final = ("Maya", "Tom", "Priya", "Jonas", "Aisha", "Liam", "Sofia", "Kenji", "Elena",
                "Marcus", "Nadia", "Oscar", "Ines", "Ravi", "Chloe", "Felix", "Hana", "Diego")
FRIENDS: Final = ("Sam", "Lena", "Noor", "Ben", "Yuki", "Carla", "Pete", "Zara", "Omar",
                  "Julia", "Theo", "Mira")
CITIES: Final = ("Lisbon", "Porto", "Valencia", "Leipzig", "Utrecht", "Gothenburg", "Bologna",
                 "Krakow", "Ghent", "Bergen", "Tallinn", "Lyon", "Montreal", "Osaka", "Auckland")
COUNTRIES: Final = ("Japan", "Peru", "Iceland", "Morocco", "Vietnam", "Portugal", "Norway",
                    "Chile", "Greece", "Kenya", "Scotland", "Mexico")
COMPANIES: Final = ("Northwind", "Bluefin Labs", "Helios Energy", "Quarry Games", "Larkspur",
                    "Meridian Health", "Copperleaf", "Orbitel", "Fieldstone Bank", "Papertrail")
JOBS: Final = ("data analyst", "product designer", "nurse", "civil engineer", "sous-chef",
               "paralegal", "high-school teacher", "pharmacist", "sound technician",
               "project manager", "veterinary assistant", "translator")
PET_KINDS: Final = (("dog", "beagle"), ("dog", "border collie"), ("dog", "greyhound"),
                    ("cat", "tabby"), ("cat", "Maine Coon"), ("cat", "ginger kitten"),
                    ("rabbit", "lop-eared bunny"), ("bird", "cockatiel"))
PET_NAMES: Final = ("Biscuit", "Pepper", "Mochi", "Luna", "Olive", "Ziggy", "Pickles", "Juno",
                    "Waffles", "Nacho")
INSTRUMENTS: Final = ("cello", "ukulele", "saxophone", "violin", "drums", "banjo", "harp",
                      "trumpet", "piano")
ALLERGENS: Final = ("peanuts", "shellfish", "sesame", "kiwi", "strawberries", "walnuts",
                    "eggs", "mustard")
MONTHS: Final = ("January", "February", "March", "April", "May", "June", "July", "August",
                 "September", "October", "November", "December")
WEEKDAYS: Final = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
                   "Sunday")
CARS: Final = ("a used Volvo estate", "a little electric Fiat", "a secondhand Subaru",
               "a red Mini", "an old Land Rover", "a hybrid Toyota")
PHONES: Final = ("a Pixel", "an iPhone", "a Fairphone", "a Samsung Galaxy", "a Nokia flip")
BOOKS: Final = ("The Salt Orchard", "Nine Winters", "A Map of Small Fires",
                "The Glass Harbour", "Quiet Engines", "The Lighthouse Ledger",
                "Paper Birds", "The Long Thaw")
SPORTS: Final = ("football", "basketball", "volleyball", "squash", "rugby", "tennis")
INJURIES: Final = ("ankle", "wrist", "knee", "shoulder", "thumb")
SCHOOLS: Final = ("Riverside Primary", "St Anne's", "Hillcrest Academy", "Oakfield School",
                  "the Montessori place on Elm Street")
CHILDREN: Final = ("Ada", "Leo", "Nina", "Max", "Ivy", "Eli")
DISHES: Final = ("ramen", "mac and cheese", "lentil soup", "chicken pho", "shepherd's pie",
                 "dal with rice", "pierogi", "mushroom risotto")
FIELDS: Final = ("marine biology", "architecture", "economics", "philosophy", "chemistry",
                 "art history", "mechanical engineering", "linguistics")
YEARS: Final = ("2009", "2011", "2013", "2015", "2017", "2019")
PARTNER_JOBS: Final = (("night shifts at the hospital", "nurse"),
                       ("the early shift at the bakery", "baker"),
                       ("long hours at the law firm", "lawyer"),
                       ("on the oil rigs, two weeks on and two off", "offshore engineer"),
                       ("at the fire station", "firefighter"))
LANGUAGES: Final = ("Japanese", "Portuguese", "Korean", "Italian", "Swahili", "Dutch", "Greek")
DISTANCES: Final = ("five", "eight", "ten", "twelve")
PLANTS: Final = ("tomatoes", "chillies", "basil", "strawberries", "courgettes", "beans")
FEARS: Final = ("flying", "deep water", "spiders", "heights", "thunderstorms")
SHOWS: Final = ("a cooking competition", "a Danish crime drama", "a nature documentary",
                "a sitcom about a hotel", "a sci-fi saga about miners")


# ------------------------------------------------------------------------- planted facts

@dataclass(frozen=True)
class FactType:
    """How one kind of fact is said, asked about and confused with something else.

    Templates use ``{s}`` (the speaker the fact is about), ``{o}`` (the other speaker)
    and the slot names; ``questions`` are (template, kind) pairs, ``exchange`` is the
    other speaker's prompt and the subject's terse answer, ``update`` a later turn that
    replaces the value (slot names with a ``2`` suffix hold the new value).
    """

    category: str
    slots: dict[str, Sequence[object]]
    statements: tuple[str, ...]
    questions: tuple[tuple[str, str], ...]
    distractors: tuple[str, ...]
    exchange: tuple[str, str] | None = None
    update: tuple[str, str] | None = None
    """(the later statement, the question about the current value)."""
    derived: dict[str, tuple[str, int]] = field(default_factory=dict)
    """slot -> (tuple slot, index): parts of a tuple-valued slot."""


FACTS: Final[tuple[FactType, ...]] = (
    FactType(
        "relocation", {"city": CITIES, "other_city": CITIES},
        ("We finally moved into our new place in {city}, the boxes are everywhere.",
         "The movers dropped the last boxes at our new place in {city} yesterday."),
        (("Which city did {s} relocate to?", "paraphrase"),
         ("Where is {s}'s new place?", "lexical")),
        ("{o}: The city council wants to relocate the bus depot again.",
         "{s}: I could never live in a really big city, too much noise.",
         "{o}: My cousin moved to {other_city} last spring and loves it.",
         "{s}: Did you hear they might relocate the farmers market?"),
        exchange=("So where did you two end up moving in the end?",
                  "{city}! We love it so far, the light there is unreal."),
    ),
    FactType(
        "job", {"job": JOBS, "company": COMPANIES, "company2": COMPANIES, "friend": FRIENDS},
        ("I started my new position as a {job} at {company} on Monday.",
         "Big news, {company} hired me as a {job}, first day was great."),
        (("Who is {s}'s current employer?", "update"),),
        ("{o}: Work has been brutal this week, back to back meetings.",
         "{s}: {friend} just got a job at {company2}, good for her.",
         "{o}: Where do you want to go for lunch after work on Friday?"),
        update=("I handed in my notice, I'm joining {company2} next month instead.",
                "Which company does {s} work for now?"),
    ),
    FactType(
        "pet", {"pet": PET_KINDS, "pet_name": PET_NAMES, "friend": FRIENDS},
        ("We adopted a {breed} from the shelter and named her {pet_name}.",
         "Meet {pet_name}, our new {breed}, she already owns the sofa."),
        (("What is the name of {s}'s {species}?", "paraphrase"),
         ("What did {s} name the {breed} from the shelter?", "lexical")),
        ("{o}: My neighbour's {species} barks all night, I am losing my mind.",
         "{s}: What is the name of that cafe near the station again?",
         "{o}: {friend} named her new car after a cartoon character."),
        exchange=("Did you pick a name for the new pet yet?",
                  "{pet_name}! It suits her, she is a little chaos machine."),
        derived={"species": ("pet", 0), "breed": ("pet", 1)},
    ),
    FactType(
        "instrument", {"instrument": INSTRUMENTS, "weekday": WEEKDAYS},
        ("I've been taking {instrument} lessons every {weekday} evening, my fingers hurt.",),
        (("Which instrument is {s} learning to play?", "paraphrase"),
         ("When does {s} have {instrument} lessons?", "lexical")),
        ("{o}: I'm learning to play chess online, it is addictive.",
         "{s}: The concert on {weekday} was too loud for me.",
         "{o}: Which song was playing in that shop earlier?"),
    ),
    FactType(
        "allergy", {"allergen": ALLERGENS, "friend": FRIENDS},
        ("I can't eat anything with {allergen}, I break out in hives.",
         "Had to use my EpiPen again, someone put {allergen} in the salad, hives everywhere."),
        (("What is {s} allergic to?", "paraphrase"),
         ("What food makes {s} break out in hives?", "lexical")),
        ("{o}: {friend} is allergic to cats but got one anyway.",
         "{s}: That food truck by the office makes amazing tacos.",
         "{o}: I think I'm allergic to Mondays, honestly."),
    ),
    FactType(
        "sibling_wedding", {"sibling": FRIENDS, "month": MONTHS},
        ("My younger brother {sibling} is getting married in {month}, I have to give a speech.",),
        (("When is {s}'s brother's wedding?", "paraphrase"),
         ("Which month is {s}'s brother {sibling} getting married?", "lexical")),
        ("{o}: Weddings are so expensive these days, it's wild.",
         "{s}: My brother still owes me money from the ski trip.",
         "{o}: My aunt got married in {month} on a boat."),
        exchange=("Has your brother set a date for the big day?",
                  "{month}, finally! Mum is already planning outfits."),
    ),
    FactType(
        "trip", {"country": COUNTRIES, "other_country": COUNTRIES, "month": MONTHS},
        ("We booked flights to {country} for our anniversary in {month}.",),
        (("Where is {s} travelling for the anniversary?", "lexical"),
         ("Which country will {s} visit to celebrate with their partner?", "paraphrase")),
        ("{o}: Flights are ridiculous right now, I checked for {other_country}.",
         "{s}: Our anniversary dinner last year was a disaster, the oven broke.",
         "{o}: I want to visit {other_country} one day, the food looks incredible."),
    ),
    FactType(
        "car", {"car": CARS},
        ("I finally sold the old hatchback and bought {car}.",),
        (("What vehicle does {s} drive these days?", "paraphrase"),
         ("What did {s} buy after selling the hatchback?", "lexical")),
        ("{o}: The garage wants a fortune to fix my brakes.",
         "{s}: Traffic on the ring road was terrible this morning.",
         "{o}: I might sell my bike, I never ride it anymore."),
    ),
    FactType(
        "book", {"book": BOOKS, "other_book": BOOKS},
        ("I just finished {book} and couldn't put it down, the ending wrecked me.",),
        (("Which novel did {s} read recently?", "paraphrase"),
         ("What did {s} think of the ending of {book}?", "lexical")),
        ("{o}: My book club picked {other_book}, it is so slow.",
         "{s}: I never finish anything I start reading, it's a problem.",
         "{o}: Did you read that article about the new library?"),
    ),
    FactType(
        "injury", {"injury": INJURIES, "sport": SPORTS},
        ("The doctor said I sprained my {injury} during the {sport} match on Saturday.",),
        (("How did {s} get hurt?", "paraphrase"),
         ("Which part of the body did {s} sprain playing {sport}?", "lexical")),
        ("{o}: I watched the {sport} final, what a game.",
         "{s}: My doctor keeps telling me to drink more water.",
         "{o}: My {injury} has been clicking lately, getting old I guess."),
        exchange=("How's the recovery going after the match?",
                  "Slowly, the {injury} is still swollen, crutches for another week."),
    ),
    FactType(
        "school", {"child": CHILDREN, "school": SCHOOLS},
        ("{child} starts at {school} in September, we are all so excited.",),
        (("Which school will {s}'s kid attend?", "paraphrase"),
         ("Where does {s}'s kid {child} start in September?", "lexical")),
        ("{o}: School holidays are coming and I have no plan at all.",
         "{s}: {child} lost another water bottle, that is four this term.",
         "{o}: My nephew hates his new school, poor kid."),
        exchange=("Did you get the place you wanted for {child} in the end?",
                  "Yes, {school}! Starting in September, fingers crossed."),
    ),
    FactType(
        "comfort_food", {"dish": DISHES},
        ("Honestly nothing beats a big bowl of {dish} on a cold night.",),
        (("What is {s}'s favourite comfort meal?", "paraphrase"),
         ("What does {s} like to eat on a cold night?", "lexical")),
        ("{o}: It's been so cold at night, I need a better duvet.",
         "{s}: I tried to cook dinner yesterday and set off the smoke alarm.",
         "{o}: What's your favourite thing about winter?"),
        exchange=("What do you make when it's freezing outside?",
                  "{dish}, every single time, no contest."),
    ),
    FactType(
        "degree", {"field_of_study": FIELDS, "year": YEARS},
        ("I graduated with a degree in {field_of_study} back in {year}.",),
        (("What did {s} study at university?", "paraphrase"),
         ("What is {s}'s degree in?", "lexical")),
        ("{o}: University fees are insane now, my niece is worried.",
         "{s}: I still have nightmares about exams, isn't that silly?",
         "{o}: Back in {year} I was living in a van, long story."),
    ),
    FactType(
        "partner_job", {"partner": PARTNER_JOBS},
        ("My partner works {partner_shift}, so we barely see each other.",),
        (("What is the occupation of {s}'s spouse?", "paraphrase"),
         ("Who in {s}'s home works {partner_shift}?", "lexical")),
        ("{o}: My partner wants to repaint the bedroom again.",
         "{s}: Living together is great until someone leaves socks everywhere.",
         "{o}: Do you ever work weekends?"),
        derived={"partner_shift": ("partner", 0), "partner_role": ("partner", 1)},
    ),
    FactType(
        "language", {"language": LANGUAGES},
        ("I signed up for evening {language} classes, the grammar is destroying me.",),
        (("Which language is {s} studying?", "paraphrase"),
         ("What classes did {s} sign up for in the evenings?", "lexical")),
        ("{o}: My gym started evening spin classes, I went once.",
         "{s}: Grammar was always my worst subject at school.",
         "{o}: The new neighbours speak three languages, it's impressive."),
        exchange=("How are the evening classes going?",
                  "The {language} verbs are destroying me, but I love it."),
    ),
    FactType(
        "running", {"distance": DISTANCES},
        ("I've been running {distance} kilometres every morning before work.",),
        (("How far does {s} jog each day?", "paraphrase"),
         ("How many kilometres does {s} run in the morning?", "lexical")),
        ("{o}: I ran for the bus this morning and nearly died.",
         "{s}: Mornings are the worst, I need three coffees.",
         "{o}: The park is packed with runners every weekend."),
    ),
    FactType(
        "phone", {"phone": PHONES, "phone2": PHONES},
        ("I dropped my phone in the canal, so I'm using {phone} for now.",),
        (("What kind of mobile does {s} use at the moment?", "update"),),
        ("{o}: My phone battery dies by lunchtime, it's useless.",
         "{s}: Can you send me that photo again? My phone deleted it.",
         "{o}: I'm trying to spend less time on my phone."),
        update=("Upgraded again, I'm on {phone2} now and the camera is amazing.",
                "Which phone does {s} have now?"),
    ),
    FactType(
        "garden", {"plant": PLANTS},
        ("The {plant} on the balcony are finally growing, I'm weirdly proud.",),
        (("What is {s} cultivating at home?", "paraphrase"),
         ("What is growing on {s}'s balcony?", "lexical")),
        ("{o}: Our balcony is just storage at this point.",
         "{s}: I killed another houseplant, I should stop buying them.",
         "{o}: My grandad grew everything himself, even grapes."),
    ),
    FactType(
        "fear", {"fear": FEARS},
        ("I've always been terrified of {fear}, even as a kid.",),
        (("What is {s} afraid of?", "paraphrase"),
         ("What has {s} been terrified of since childhood?", "lexical")),
        ("{o}: That horror film last night was terrifying.",
         "{s}: I was such a nervous kid, scared of everything.",
         "{o}: My sister is afraid of clowns, I tease her about it."),
    ),
    FactType(
        "show", {"show": SHOWS},
        ("We've been binge-watching {show}, three episodes a night.",),
        (("What series is {s} hooked on?", "paraphrase"),
         ("What has {s} been binge-watching?", "lexical")),
        ("{o}: There's nothing good on TV anymore.",
         "{s}: I fell asleep on the sofa again last night.",
         "{o}: Do you know any good documentaries?"),
        exchange=("Watching anything good at the moment?",
                  "{show}, we are completely hooked, three episodes a night."),
    ),
)


# ---------------------------------------------------------------------------- small talk

OPENERS: Final = ("", "", "", "Honestly, ", "Ha, ", "Oh, ", "You know, ", "Well, ", "Yeah, ",
                  "So ", "Funny thing, ", "To be fair, ", "Ugh, ")
SMALL_TALK: Final = (
    "the traffic on the way to work was terrible this morning",
    "I spent the whole {weekday} cleaning the kitchen",
    "we watched a documentary about octopuses last night",
    "the weather in the city has been so grey lately",
    "my manager scheduled another meeting for {weekday} afternoon",
    "I tried a new recipe with chickpeas and it was a disaster",
    "{friend} keeps sending me videos of her cat",
    "the bus was late again and I missed the start of the meeting",
    "we should grab coffee at that place near the station",
    "I'm thinking about repainting the living room green",
    "the neighbours are renovating and the drilling starts at seven",
    "I finally fixed the leaking tap in the bathroom",
    "there was a huge queue at the supermarket today",
    "{friend} invited us to a barbecue on {weekday}",
    "I can't believe it's already {month}",
    "my back hurts from sitting at the desk all day",
    "we went for a long walk by the river on {weekday}",
    "the internet was down all evening, I read instead",
    "I burnt the toast again, classic me",
    "the office coffee machine broke, everyone is grumpy",
    "I've been sleeping badly, too much screen time probably",
    "we ordered pizza and watched a film, very lazy evening",
    "I need a holiday, even just a long weekend",
    "my plants need repotting but I keep forgetting",
    "{friend} is organising a quiz night at the pub",
    "the train tickets went up again this year",
    "I found a great second-hand shop near the market",
    "I started a puzzle with a thousand pieces, terrible idea",
    "the heating in our building is broken again",
    "I've been trying to drink less coffee, it's not going well",
    "we had friends over for dinner and stayed up way too late",
    "my laptop is so slow I could cry",
    "I went to the dentist and it was fine, surprisingly",
    "there's a new bakery on our street, dangerous",
    "I've been listening to a podcast about ancient Rome",
    "it rained the entire weekend so we stayed in",
    "my sister called, she wants to visit in {month}",
    "I cleaned out the garage and found my old skateboard",
    "I signed up for a pottery workshop, we'll see",
    "work has been calm for once, I'm suspicious",
    "the kids next door learned the recorder, send help",
    "I lost my keys twice this week",
    "we finally booked the boiler service",
    "I forgot my umbrella and got soaked on the way home",
    "{friend} lent me a board game and we played until midnight",
    "the park was full of dogs this morning, it made my day",
    "I've been meal-prepping on {weekday}s, it saves so much time",
    "the cinema near us is closing, which is sad",
    "we went to the farmers market and bought way too much cheese",
    "my phone keeps autocorrecting my name, it's absurd",
)
REPLIES: Final = (
    "That sounds like a lot, hang in there.", "Ha, same here honestly.",
    "Oh no, that's annoying.", "I know exactly what you mean.", "Nice, good for you!",
    "Haha, classic.", "That's lovely.", "Ugh, I feel that.", "Wait, really?",
    "Tell me more!", "Sounds like a good week then.", "That's hilarious.",
    "We should do that together sometime.", "I'd be so frustrated.",
    "Fair enough.", "Oh that reminds me, I need to call my mum.",
    "How did it go in the end?", "Same thing happened to me last month.",
)
LINKS: Final = ("Also, ", "Oh and ", "Plus ", "And ", "Other than that, ")
CLOSERS: Final = ("", "", "", " How about you?", " What have you been up to?", " Anyway.",
                  " Can't complain.", " It was fun though.", " Crazy, right?")


# ---------------------------------------------------------------------------- generation

def generate(seed: int = 20261130, *, conversations: int = 4, turns: int = 600,
             facts_per_conversation: int = 18) -> DataSet:
    """The data set for ``seed``: ``conversations`` dialogues of ``turns`` turns each,
    with ``facts_per_conversation`` planted facts (and one or two questions each)."""
    if conversations < 1 or turns < 100 or not 1 <= facts_per_conversation <= 2 * len(FACTS):
        raise ValueError("need >= 1 conversation, >= 100 turns, 1..2*len(FACTS) facts")
    rng = random.Random(seed)
    return DataSet(seed, tuple(_conversation(rng, f"conv{i + 1:02d}", turns,
                                             facts_per_conversation)
                               for i in range(conversations)))


@dataclass
class _Slot:
    """A turn position: filled by small talk unless a planted turn claims it."""

    speaker: int | None = None
    text: str | None = None


def _conversation(rng: random.Random, conversation_id: str, turns: int,
                  facts: int) -> Conversation:
    speakers = tuple(rng.sample(NAMES, 2))
    slots = [_Slot() for _ in range(turns)]
    free = list(range(turns))
    rng.shuffle(free)

    def claim(count: int, *, consecutive: bool = False) -> list[int]:
        """Free positions, ascending; ``consecutive`` claims neighbours (a prompt and
        its answer)."""
        if consecutive:
            for index, position in enumerate(free):
                if position + 1 < turns and position + 1 in free:
                    free.pop(index)
                    free.remove(position + 1)
                    return [position, position + 1]
            raise ValueError("no two consecutive free turns left")
        taken = sorted(free[:count])
        del free[:count]
        return taken

    planned: list[tuple[str, str, tuple[int, ...], str]] = []  # text, category, evidence, kind
    kinds = list(FACTS) + list(FACTS)
    rng.shuffle(kinds)
    told: set[tuple[str, int]] = set()
    for fact in kinds[:facts]:
        subject = rng.randrange(2)
        if (fact.category, subject) in told:  # the same kind of fact twice: the other one's
            subject = 1 - subject
        told.add((fact.category, subject))
        values = _values(rng, fact)
        names = {"s": speakers[subject], "o": speakers[1 - subject], **values}
        if fact.update is not None:
            first, later = claim(2)
            slots[first] = _Slot(subject, _fill(rng.choice(fact.statements), names))
            slots[later] = _Slot(subject, _fill(fact.update[0], names))
            planned.append((_fill(fact.update[1], names), fact.category, (later,), "update"))
            for template, _kind in fact.questions:
                planned.append((_fill(template, names), fact.category, (later,), "update"))
        elif fact.exchange is not None and rng.random() < 0.6:
            prompt, answer = claim(0, consecutive=True)
            slots[prompt] = _Slot(1 - subject, _fill(fact.exchange[0], names))
            slots[answer] = _Slot(subject, _fill(fact.exchange[1], names))
            template = next(t for t, kind in fact.questions if kind == "paraphrase")
            planned.append((_fill(template, names), fact.category, (answer,), "exchange"))
        else:
            (position,) = claim(1)
            slots[position] = _Slot(subject, _fill(rng.choice(fact.statements), names))
            for template, kind in fact.questions:
                planned.append((_fill(template, names), fact.category, (position,), kind))
        for distractor in fact.distractors:
            (position,) = claim(1)
            who, _, text = _fill(distractor, names).partition(": ")
            slots[position] = _Slot(speakers.index(who), text)

    # Small talk runs about as long as real chat turns (15-20 words on average): a reply
    # often goes on with news of one's own, and news often comes in twos.
    previous_small_talk = False
    for position, slot in enumerate(slots):
        if slot.text is not None:
            previous_small_talk = False
            continue
        slot.speaker = position % 2
        if previous_small_talk and rng.random() < 0.45:
            reply = rng.choice(REPLIES)
            slot.text = reply if rng.random() < 0.3 else f"{reply} {_sentence(rng, '')}"
        else:
            text = _sentence(rng, rng.choice(OPENERS))
            if rng.random() < 0.5:
                text += " " + _sentence(rng, rng.choice(LINKS))
            slot.text = text + rng.choice(CLOSERS)
        previous_small_talk = True

    turn_list = tuple(Turn(f"{conversation_id}-t{position:04d}",
                           speakers[slot.speaker or 0], slot.text or "")
                      for position, slot in enumerate(slots))
    questions = tuple(
        Question(f"{conversation_id}-q{index:03d}", text, tuple(turn_list[p].turn_id
                                                                 for p in evidence),
                 category, kind)
        for index, (text, category, evidence, kind) in enumerate(planned))
    return Conversation(conversation_id, speakers, turn_list, questions)  # type: ignore[arg-type]


def _sentence(rng: random.Random, opener: str) -> str:
    clause = _fill(rng.choice(SMALL_TALK), {"weekday": rng.choice(WEEKDAYS),
                                            "month": rng.choice(MONTHS),
                                            "friend": rng.choice(FRIENDS)})
    return (opener + clause if opener else clause[0].upper() + clause[1:]) + "."


def _values(rng: random.Random, fact: FactType) -> dict[str, object]:
    values: dict[str, object] = {}
    for name, pool in fact.slots.items():
        choices = [v for v in pool if v not in values.values()]  # "other_city" != "city"
        values[name] = rng.choice(choices)
    for name, (source, index) in fact.derived.items():
        values[name] = values[source][index]  # type: ignore[index]
    return values


def _fill(template: str, names: dict[str, object]) -> str:
    return template.format(**{key: str(value) for key, value in names.items()})


def fingerprint(data: DataSet) -> str:
    """SHA-256 of the data set's canonical JSON: equal iff two runs saw the same data."""
    canonical = json.dumps(asdict(data), sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Print a summary and a sample of the data.")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--sample", type=int, default=3)
    args = parser.parse_args()
    data = generate(args.seed)
    print(f"{data.version} seed={data.seed} conversations={len(data.conversations)} "
          f"turns={data.turn_count} questions={data.question_count} "
          f"sha256={fingerprint(data)[:16]}")
    conversation = data.conversations[0]
    by_id = {turn.turn_id: turn for turn in conversation.turns}
    for question in conversation.questions[:args.sample]:
        print(f"\nQ [{question.kind}] {question.text}")
        for turn_id in question.evidence:
            print(f"  evidence {turn_id}: {by_id[turn_id].memory_text}")


if __name__ == "__main__":
    main()
