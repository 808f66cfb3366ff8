"""Word lists the task generators draw slot fillers from (names, places, colours, things)."""

FIRST_NAMES = (
    "Alice Amara Anna Ben Bruno Carla Chen Chloe Daniel Dara Diego Elena Emil Emma Farah Felix "
    "Grace Hana Hugo Ines Ivan Jack Jonas Julia Kai Karin Leo Lena Liam Lucia Maya Mateo Mia Nadia "
    "Noah Nora Olga Omar Oscar Paula Priya Quinn Rafael Rosa Ruth Sam Sara Sofia Tariq Theo Tom "
    "Uma Victor Vera Wen Yara Yusuf Zoe Ada Boris Cleo Dmitri Edith Frida Gael Hiro Iris Jonah "
    "Keiko Lars Mira Nils Otto Pia Rhea Sven Tova Ulla Wanda Xavier Yuki Zara"
).split()
PET_NAMES = (
    "Biscuit Pepper Luna Max Coco Oreo Mochi Rusty Ziggy Peanut Shadow Noodle Pickle Tofu Bean "
    "Maple Olive Pixel Comet Sunny Bubbles Ginger Pumpkin Waffles Nugget Clover Sprout Marble"
).split()
CITIES = (
    "Lisbon Oslo Nairobi Lima Kyoto Dublin Quito Porto Tallinn Hanoi Cairo Seville Bergen Austin "
    "Denver Perth Accra Krakow Riga Munich Lyon Bristol Vienna Prague Osaka Busan Chennai Bogota "
    "Montreal Halifax Cork Turin Bologna Ghent Utrecht Malmo Tampere Cusco Dakar Tunis Zagreb Split "
    "Geneva Basel Hobart Darwin Auckland Nelson Calgary Boston Seattle Madison Toledo Valencia"
).split()
COUNTRIES = (
    "Portugal Norway Kenya Peru Japan Ireland Ecuador Estonia Vietnam Egypt Spain Chile Ghana "
    "Poland Latvia Austria France Iceland Morocco Canada Mexico Brazil Finland Greece Italy Croatia"
).split()
COLOURS = ("red green blue yellow purple orange pink brown black white grey teal gold silver navy "
           "maroon violet turquoise beige cyan").split()
FAVOURITES = {
    "colour": COLOURS,
    "fruit": "apple banana cherry mango peach pear plum kiwi lemon lime melon grape papaya fig apricot".split(),
    "animal": "otter fox owl dolphin panda tiger zebra koala rabbit horse penguin falcon wolf lynx seal".split(),
    "season": "spring summer autumn winter".split(),
    "sport": "tennis football swimming cycling rowing chess hockey climbing skiing volleyball".split(),
    "instrument": "piano violin guitar cello flute drums trumpet harp clarinet banjo".split(),
    "drink": "tea coffee cocoa lemonade milk juice water".split(),
    "flower": "rose tulip daisy lily orchid sunflower lavender poppy iris".split(),
    "vegetable": "carrot potato pepper spinach broccoli onion pumpkin leek cabbage".split(),
    "number": [str(n) for n in range(1, 100)],
    "day": "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split(),
    "month": "January February March April May June July August September October November December".split(),
}
SHAPES = ("circle", "square", "triangle", "star", "cross")
SHAPE_PLURALS = {"circle": "circles", "square": "squares", "triangle": "triangles", "star": "stars",
                 "cross": "crosses"}
TOPIC_WORDS = ("the weather", "my garden", "cooking", "trains", "the sea", "music", "old maps",
               "birds", "mountains", "tea", "bicycles", "the moon", "libraries", "rivers", "clocks")
